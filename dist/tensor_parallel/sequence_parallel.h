// The parameters of sequence parallelism's replicated region (Korthikanti et al. 2022, section
// 4.2.2; Megatron-LM marks them `sequence_parallel`): every rank of the tensor-parallel group
// holds them whole, but under sequence parallelism each rank runs them on its own S/T tokens, so
// its gradient is a partial sum over those tokens. The whole gradient is the sum over the group:
//
//   LayerNorm (ln_1, ln_2, ln_f) weight and bias    x [B, S/T, C] -> LN -> ...
//   a row-parallel Linear's bias                     reduce-scatter -> + b on [B, S/T, C]
//
//   dL/dw = sum over the ranks r of dL/dw restricted to rank r's tokens: an all-reduce of |w|.
//
// sum_gradients_over_sequence_parallel_group registers, on each, a hook that all-reduces its
// gradient over the group when it arrives, before it is accumulated into grad(): so grad() is the
// whole gradient, the same on every rank, for everything that reads it after backward (clipping's
// norm, the optimizer, and a data-parallel DDP or ZeRO over the replicas: the tensor-parallel
// sum first, then their average), and gradient accumulation over micro-batches sums whole
// gradients (a hook after accumulation would add the earlier micro-batches' sum T times).
// Every rank holds the same graph, so the hooks' all-reduces run in the same order on every rank.
//
// The position embedding wpe is not among them: SequenceParallelPositionEmbedding looks up every
// position on every rank and scatters the rows, so its gradient arrives whole (the scatter's
// backward all-gathers the rows' gradients).
#pragma once

#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

// The model's LayerNorm weights and biases and its sequence-parallel RowParallelLinears' biases,
// in the model's parameter order.
std::vector<Variable> sequence_parallel_parameters(nn::Module& model);

// On each of `params`: a hook summing its gradient over `group` as it arrives (see above).
void sum_gradients_over_sequence_parallel_group(const std::vector<Variable>& params,
                                                const std::shared_ptr<ProcessGroup>& group);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
