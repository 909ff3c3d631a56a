// The collectives of sequence parallelism (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", section 4.2.2: the paper's g and g-bar), as autograd
// ops over a tensor-parallel group of T ranks, along the sequence dimension of [B, S, C]
// activations (dim 1, kSequenceDim):
//
//                                              forward              backward
//   scatter_to_sequence_parallel_region        keep this rank's     all-gather
//                                              S/T tokens
//   gather_from_sequence_parallel_region       all-gather           reduce-scatter (sum)   "g"
//   reduce_scatter_to_sequence_parallel_region reduce-scatter (sum) all-gather             "g-bar"
//
// Tensor parallelism's f and g (parallel_region.h) leave the LayerNorms and the residual stream
// between the blocks' sublayers whole on every rank: T copies of the same [B, S, C] values.
// Sequence parallelism splits that region along the sequence instead (LayerNorm and the residual
// add treat each token alone), and replaces f and g by these:
//
//                      sequence-parallel              tensor-parallel            sequence-parallel
//   x [B, S/T, C] ─LN─> ─g (all-gather)─> [B, S, C] ─> column ─> row ─> ─g-bar (reduce-scatter)─> + x
//
// An all-reduce is a reduce-scatter then an all-gather, so a block moves the same bytes as
// under plain tensor parallelism: per sublayer, forward one all-gather and one reduce-scatter of
// [B, S, C] (2 (T-1)/T of it per rank, as the all-reduce g), backward the same (the all-reduce f).
//
// Every rank holds S/T tokens: the sequence must divide by T (sequence_shard_length's error
// names both). scatter_ is tensor parallelism's scatter_to_parallel_region along the sequence;
// the plain-tensor collectives are parallel_region.h's all_gather_along and reduce_scatter_along.
// Every rank of the group must call these in the same order (they are collectives).
#pragma once

#include <memory>

#include "autograd/variable.h"
#include "dist/process_group.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

// The sequence dimension of tessera's [B, S, C] activations.
constexpr int64_t kSequenceDim = 1;

// S / T, the tokens a rank holds of a sequence of `sequence` tokens over `parts` ranks, or an
// error naming both when they do not divide (`what` names the caller).
int64_t sequence_shard_length(int64_t sequence, int parts, const char* what);

// x [B, S, ...] the same on every rank -> this rank's tokens [B, S/T, ...].
Variable scatter_to_sequence_parallel_region(const Variable& x,
                                             const std::shared_ptr<ProcessGroup>& group);
// x [B, S/T, ...] this rank's tokens -> [B, S, ...] every rank's, in rank order. Backward sums
// the ranks' gradients of the whole sequence and keeps this rank's tokens (the layer after
// this takes a slice of the features on every rank, so each rank's dL/dx is a partial sum).
Variable gather_from_sequence_parallel_region(const Variable& x,
                                              const std::shared_ptr<ProcessGroup>& group);
// x [B, S, ...] a partial sum on every rank -> this rank's tokens [B, S/T, ...] of the sum.
Variable reduce_scatter_to_sequence_parallel_region(const Variable& x,
                                                    const std::shared_ptr<ProcessGroup>& group);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
