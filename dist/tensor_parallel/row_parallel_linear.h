// RowParallelLinear: Y = X A^T + b with A's input features (the columns of the weight, the rows
// of Megatron's X A) split over the T ranks of a tensor-parallel group.
//
//     weight [out, in]: columns [i_0 .. i_0+i_r) -> rank r        X_r: rank r's input features
//
//     Y = g( X_r A_r^T ) + b        g = reduce_from_parallel_region: the sum over ranks of the
//                                   partial products; backward hands dL/dY to every rank.
//
// The input is already split (input_is_parallel: the output of a ColumnParallelLinear, the
// Megatron MLP block) or is the full X on every rank, which the layer scatters. The bias is not
// split: every rank holds it whole and adds it once, after the sum (every rank then computes
// the same bias gradient, so it needs no reduction across the group). Parameters per rank:
// out * i_r + out.
//
// Sequence parallelism (set_sequence_parallel, sequence_parallel_region.h): the partial products
// are reduce-scattered along the sequence (each rank keeps the sum for its S/T tokens) instead
// of all-reduced, and the bias is added to those tokens. The bias's gradient on a rank then
// covers its S/T tokens only: it is one of sequence_parallel_parameters (sequence_parallel.h),
// whose gradients are summed over the group.
//
// As ColumnParallelLinear: initialized from this rank's columns of a full nn::Linear (the same
// full weight for any T), state_dict() holds the full weight (an all-gather of the columns;
// every rank must call it), load_state_dict() takes this rank's columns, and input features
// need not divide by T.
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "dist/tensor_parallel/slices.h"
#include "nn/linear.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

class RowParallelLinear : public nn::Module {
 public:
  // This rank's columns of `full` (every rank of `group` passes the same full Linear).
  RowParallelLinear(const nn::Linear& full, std::shared_ptr<ProcessGroup> group,
                    bool input_is_parallel = true);
  // Draws the full Linear(in_features, out_features) from the default generator, as
  // nn::Linear would, and keeps this rank's columns.
  RowParallelLinear(int64_t in_features, int64_t out_features,
                    std::shared_ptr<ProcessGroup> group, bool input_is_parallel = true);

  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  // This rank's input features: [start, start + length) of in_features().
  Slice input_slice() const { return input_slice_; }
  const Variable& weight() const { return weight_; }  // [out, length]
  const Variable& bias() const { return bias_; }      // [out], whole on every rank
  const std::shared_ptr<ProcessGroup>& group() const { return group_; }
  // Sequence parallelism: the output is this rank's tokens [B, S/T, out] of the sum (g-bar, a
  // reduce-scatter) rather than the whole sum on every rank (g).
  void set_sequence_parallel(bool on) { sequence_parallel_ = on; }
  bool sequence_parallel() const { return sequence_parallel_; }

 protected:
  std::vector<StateEntry> own_state_entries() const override;
  void save_own_state(const std::string& prefix, StateDict& out) const override;
  void load_own_state(const std::string& prefix, const StateDict& state) override;

 private:
  std::shared_ptr<ProcessGroup> group_;
  int64_t in_features_, out_features_;
  Slice input_slice_;
  bool input_is_parallel_;
  bool sequence_parallel_ = false;
  Variable weight_, bias_;
};

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
