// DeepSpeed-Ulysses (Jacobs et al. 2023): context parallelism's other way to attend over a
// sequence split across C ranks. Instead of passing key/value blocks around a ring, two
// all-to-alls trade the split: before attention each rank gives up its other heads' rows and
// gathers its own heads' rows of the whole sequence; after it, the reverse.
//
//   rank r holds  q, k, v [B, H, T/C, D]  (its chunks of the sequence, every head)
//     all-to-all: head group j (H/C heads) of its rows to rank j; from every rank i, rank i's
//                 rows of head group r
//   rank r holds  q, k, v [B, H/C, T, D]  (every position, its heads) -> causal attention
//     all-to-all: rank i's rows of the output back to rank i
//   rank r holds  out [B, H, T/C, D]
//
// Bytes per rank and layer (as all-to-alls, (C-1)/C of each tensor leaves the rank): forward
// 3 (q, k, v) + 1 (out) tensors of B H (T/C) D values, backward 1 (dO) + 3 (dQ, dK, dV): each
// 4 (C-1)/C B H (T/C) D values, where ring attention sends (C-1) B H (T/C) D x 2 (K and V) in
// forward and twice that in backward; Ulysses's volume per rank shrinks as C grows, the ring's
// does not. Ulysses needs C to divide the heads (it splits them), and the attention itself is
// the plain one-process op on whole sequences, so no causal imbalance arises whatever the
// chunk order; its transfers are not overlapped with compute (each all-to-all is needed at
// once).
//
// The all-to-all is built from point-to-point messages (every pair posted at once). Every rank
// of the group must call this in the same order, and run its backward.
#pragma once

#include <memory>

#include "autograd/variable.h"
#include "dist/context_parallel/sequence_split.h"
#include "dist/process_group.h"

namespace tessera {
namespace dist {
namespace context_parallel {

// q, k, v [B, H, T/C, D]: this rank's rows (at rank_positions(T, rank, C, split)); H divisible
// by C. The result is this rank's rows of causal attention over the whole sequence.
Variable ulysses_attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                           const std::shared_ptr<ProcessGroup>& group,
                           SequenceSplit split = SequenceSplit::kHeadTail);

// As ring_self_attention (ring_attention.h): qkv [B, T/C, 3C] (q | k | v, n_head heads each)
// -> this rank's rows of the attention's output [B, T/C, C], by ulysses_attention.
Variable ulysses_self_attention(const Variable& qkv, int64_t n_head,
                                const std::shared_ptr<ProcessGroup>& group,
                                SequenceSplit split = SequenceSplit::kHeadTail);

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
