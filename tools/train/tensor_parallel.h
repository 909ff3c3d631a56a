// --tensor-parallel=T: which of the model's layers the tool splits, and the head that reads its
// output. The library does the splitting (dist::tensor_parallel::parallelize_module on a model
// built as usual, so the same seed gives the same full weights) and the class-parallel loss;
// the tool only chooses:
//   --model=mlp              fc1 column-parallel, fc2 row-parallel (Megatron-LM's MLP block):
//                            the output is the full logits and the loss the ordinary one;
//   --model=gpt-*            Megatron-LM's GPT (dist::tensor_parallel::parallelize_gpt): the
//                            blocks' attention heads and MLP, and the vocabulary: wte's rows, the
//                            tied lm_head's logits split, the loss vocabulary-parallel, the
//                            validation loss too, and --sample gathers the last position's logits;
//                            with --sequence-parallel=true also Megatron's sequence parallelism
//                            (the LayerNorms and residual stream on --seq-len/T tokens a rank);
//   the other models, or --tp-head=true
//                            the classifier column-parallel, its logits left split by class,
//                            dist::tensor_parallel::ClassParallelCrossEntropy for the loss and
//                            the predicted classes (TorchShard's recipe for large heads).
#pragma once

#include <cstdint>

#include "dist/topology.h"
#include "nn/sequential.h"
#include "tools/train/flags.h"
#include "tools/train/report.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

// The figures the final JSON line reports beside the non-parallel ones.
struct TensorParallelFigures {
  int size = 1;                        // T
  int64_t parameter_bytes = 0;         // this rank's parameters
  int64_t parameter_bytes_full = 0;    // the whole model's, as one process holds them
  int64_t logits_per_example = 0;      // this rank's head outputs per example
  int64_t logits_per_example_full = 0;

  void report(json::Object& summary, int64_t batch_size) const;
};

// The ordinary head: cross-entropy (with --label-smoothing) and argmax.
Head plain_head(const Config& config);

// Splits `model`'s layers over the topology's tensor-parallel group as the flags ask and
// returns the head that goes with them; `figures` gets the sizes before and after.
Head split_layers(const Config& config, nn::Sequential& model, const dist::Topology& topology,
                  TensorParallelFigures* figures);

}  // namespace train
}  // namespace tessera
