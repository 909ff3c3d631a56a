// How a GPT's ranks share its sequence and its layers (docs/SEQUENCE.md): T-way tensor
// parallelism (Megatron-LM), with or without sequence parallelism, and C-way context
// parallelism (ring attention). One rank of such a layout is what cost/activation_memory.h and
// cost/sequence_traffic.h count.
#pragma once

namespace tessera {
namespace cost {

struct SequenceLayout {
  int tensor_parallel = 1;  // T
  bool sequence_parallel = false;
  int context_parallel = 1;  // C
  int ranks() const { return tensor_parallel * context_parallel; }
};

}  // namespace cost
}  // namespace tessera
