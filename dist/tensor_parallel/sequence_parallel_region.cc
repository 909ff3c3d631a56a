#include "dist/tensor_parallel/sequence_parallel_region.h"

#include <vector>

#include "autograd/custom_op.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/trace_recorder.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {

// S of activations [B, S, ...], at least one token.
int64_t sequence_of(const Variable& x, const char* op) {
  TS_CHECK(x.defined() && x.dim() >= 2, op, ": expected activations [B, S, ...] with the "
           "sequence in dim ", kSequenceDim, ", got ", x.defined() ? x.shape() : Shape{});
  TS_CHECK(x.size(kSequenceDim) >= 1, op, ": no tokens (shape ", x.shape(), ")");
  return x.size(kSequenceDim);
}

}  // namespace

int64_t sequence_shard_length(int64_t sequence, int parts, const char* what) {
  TS_CHECK(parts >= 1, what, ": the tensor-parallel size must be at least 1, got ", parts);
  TS_CHECK(sequence >= parts && sequence % parts == 0, what, ": a sequence of ", sequence,
           " tokens does not divide by the tensor-parallel size T = ", parts,
           " (sequence parallelism gives each rank S / T tokens: choose a sequence length that "
           "is a multiple of ", parts, ")");
  return sequence / parts;
}

Variable scatter_to_sequence_parallel_region(const Variable& x,
                                             const std::shared_ptr<ProcessGroup>& group) {
  const char* op = "scatter_to_sequence_parallel_region";
  sequence_shard_length(sequence_of(x, op), group->size(), op);
  return scatter_to_parallel_region(x, kSequenceDim, group);
}

Variable gather_from_sequence_parallel_region(const Variable& x,
                                              const std::shared_ptr<ProcessGroup>& group) {
  const int64_t shard = sequence_of(x, "gather_from_sequence_parallel_region");
  // Every rank holds S/T tokens, so no lengths are exchanged (gather_from_parallel_region's
  // slices may differ; these may not).
  const std::vector<int64_t> lengths(group->size(), shard);
  trace::LabelIfRecording label("sp all_gather (forward)", "all_gather");
  return record("GatherFromSequenceParallelRegionBackward",
                all_gather_along(x.data(), kSequenceDim, lengths, *group), {x},
                [group, lengths](const Tensor& g) -> Grads {
                  trace::LabelIfRecording label("sp reduce_scatter (backward)", "reduce_scatter");
                  return {reduce_scatter_along(g, kSequenceDim, lengths, *group)};
                });
}

Variable reduce_scatter_to_sequence_parallel_region(const Variable& x,
                                                    const std::shared_ptr<ProcessGroup>& group) {
  const char* op = "reduce_scatter_to_sequence_parallel_region";
  const int64_t shard = sequence_shard_length(sequence_of(x, op), group->size(), op);
  const std::vector<int64_t> lengths(group->size(), shard);
  trace::LabelIfRecording label("sp reduce_scatter (forward)", "reduce_scatter");
  return record("ReduceScatterToSequenceParallelRegionBackward",
                reduce_scatter_along(x.data(), kSequenceDim, lengths, *group), {x},
                [group, lengths](const Tensor& g) -> Grads {
                  trace::LabelIfRecording label("sp all_gather (backward)", "all_gather");
                  return {all_gather_along(g, kSequenceDim, lengths, *group)};
                });
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
