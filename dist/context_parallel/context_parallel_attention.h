// ContextParallelAttention: GPT-2's attention sublayer (nn::CausalSelfAttention) with its
// attention run over a context-parallel group, x [B, T/C, C] -> [B, T/C, C]:
//
//   x --c_attn--> qkv [B, T/C, 3C] --ring_self_attention--> y [B, T/C, C] --c_proj--> out
//                                   (or ulysses_self_attention)
//
// Two algorithms: ring attention (ring_attention.h; K/V blocks passed around the ring while
// each block computes, any head count) and DeepSpeed-Ulysses (ulysses_attention.h; two
// all-to-alls trade the sequence split for a split of the heads, so C must divide the heads a
// rank holds, and nothing overlaps).
//
// The rank's T/C tokens are its chunks of the sequence (sequence_split.h); c_attn and c_proj
// work token by token, so only the attention in the middle needs the other ranks' tokens, and
// it gets their keys and values around the ring (ring_attention.h). The two Linears are the
// replaced module's own children under the same names, so parameter names, checkpoints and the
// initialization do not change. Like CausalSelfAttention it finds them by name at every call
// and runs as many heads as c_attn's output holds, so tensor parallelism's split of c_attn by
// heads composes with it.
//
// Selective recomputation of the attention core (nn::CausalSelfAttention::set_recompute_core,
// autograd/recompute.h) carries over from the replaced module: the ring runs again from c_attn's
// output in backward (its exchanges too, on every rank alike) instead of its output being kept.
#pragma once

#include <memory>
#include <string>

#include "dist/context_parallel/ring_attention.h"
#include "dist/process_group.h"
#include "nn/causal_self_attention.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace context_parallel {

enum class ContextParallelAlgorithm { kRing, kUlysses };
// "ring" / "ulysses", and back (an unknown name is an error listing both).
const char* algorithm_name(ContextParallelAlgorithm algorithm);
ContextParallelAlgorithm parse_algorithm(const std::string& name);

class ContextParallelAttention : public nn::Module {
 public:
  // Takes over `attention`'s c_attn and c_proj (shared, not copied). Ulysses reads only the
  // options' split.
  ContextParallelAttention(const nn::CausalSelfAttention& attention,
                           std::shared_ptr<ProcessGroup> group,
                           const RingAttentionOptions& options = {},
                           ContextParallelAlgorithm algorithm = ContextParallelAlgorithm::kRing);
  std::string type_name() const override { return "ContextParallelAttention"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

  void set_recompute_core(bool on) { recompute_core_ = on; }
  bool recompute_core() const { return recompute_core_; }

 private:
  nn::Module& child(const char* name) const;

  int64_t n_embd_, n_head_;
  std::shared_ptr<ProcessGroup> group_;
  RingAttentionOptions options_;
  ContextParallelAlgorithm algorithm_;
  bool recompute_core_;
};

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
