// The four differentiable collectives of tensor parallelism (Megatron-LM, Shoeybi et al. 2019,
// section 3: the paper's f and g), as autograd ops over a tensor-parallel group of T ranks.
//
//                                 forward                      backward
//   copy_to_parallel_region       identity                     all-reduce (sum)     "f"
//   reduce_from_parallel_region   all-reduce (sum)             identity             "g"
//   scatter_to_parallel_region    keep this rank's slice       all-gather
//   gather_from_parallel_region   all-gather                   keep this rank's slice
//
// Each pair is the other's transpose, which is why the backward column mirrors the forward
// one. In a Megatron MLP block, Y = GeLU(X A) B with A split by columns and B by rows:
//
//     X --f--> [X A_r] --GeLU--> [Y_r B_r] --g--> sum_r Y_r B_r
//
// f hands the same X to every rank and, in backward, sums the ranks' partial dL/dX; g sums the
// partial products and hands the same dL/dY back to every rank. A slice along `dim` is
// slice_of(size, T, rank) (slices.h), so sizes need not divide by T.
//
// Every rank of the group must call these in the same order (they are collectives), and the
// backward collectives run in the same order on every rank because every rank holds the same
// graph.
#pragma once

#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "dist/process_group.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

Variable copy_to_parallel_region(const Variable& x, const std::shared_ptr<ProcessGroup>& group);
Variable reduce_from_parallel_region(const Variable& x,
                                     const std::shared_ptr<ProcessGroup>& group);
// x holds the full dimension `dim` on every rank (the same values); the result is this rank's
// slice of it.
Variable scatter_to_parallel_region(const Variable& x, int64_t dim,
                                    const std::shared_ptr<ProcessGroup>& group);
// x holds this rank's slice of `dim`; the result is the full dimension, slices in rank order.
Variable gather_from_parallel_region(const Variable& x, int64_t dim,
                                     const std::shared_ptr<ProcessGroup>& group);

// The plain-tensor collectives under them (no autograd), also used to save and load the
// parallel layers' full weights.
// Rank r's `local` holds lengths[r] entries along dim; returns the concatenation along dim.
Tensor all_gather_along(const Tensor& local, int64_t dim, const std::vector<int64_t>& lengths,
                        ProcessGroup& group);
// A copy of the sum of every rank's x.
Tensor all_reduce_sum(const Tensor& x, ProcessGroup& group);
// all_gather_along's transpose: every rank's `full` holds sum(lengths) entries along dim; returns
// this rank's slice (lengths[rank] entries, after the lower ranks' ones) of the sum over ranks.
Tensor reduce_scatter_along(const Tensor& full, int64_t dim, const std::vector<int64_t>& lengths,
                            ProcessGroup& group);
// This rank's slice of `full` along dim, as a contiguous copy of its own (never a view of full).
Tensor local_slice(const Tensor& full, int64_t dim, ProcessGroup& group, const char* what);

// The same for a dimension made of `chunks` equal blocks, each split over the ranks on its own:
// c_attn's output features q | k | v split by heads, rank r holding q_r | k_r | v_r. `lengths`
// are the slices of one block; the gathered result is in the blocks' order (q | k | v, each
// whole). chunks = 1 is all_gather_along / local_slice.
//
//   rank 0: q_0 k_0 v_0  ─┐  all-gather   q_0 k_0 v_0 q_1 k_1 v_1  ─reorder─>  q_0 q_1 k_0 k_1 v_0 v_1
//   rank 1: q_1 k_1 v_1  ─┘
Tensor all_gather_chunks(const Tensor& local, int64_t dim, int64_t chunks,
                         const std::vector<int64_t>& lengths, ProcessGroup& group);
Tensor local_chunk_slices(const Tensor& full, int64_t dim, int64_t chunks, ProcessGroup& group,
                          const char* what);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
