// ColumnParallelLinear: Y = X A^T + b with A's output features (the rows of the weight, the
// columns of Megatron's X A) split over the T ranks of a tensor-parallel group.
//
//            weight [out, in]                        rank r computes
//     rows [0, o_0)        -> rank 0        Y_r = f(X) A_r^T + b_r     [N, o_r]
//     rows [o_0, o_0+o_1)  -> rank 1
//     ...                                   f = copy_to_parallel_region: the same X on every
//                                           rank; backward sums the ranks' partial dL/dX.
//
// The output stays split (each rank holds its o_r output features: "class-parallel" logits, or
// the input of a RowParallelLinear) unless gather_output is set, which all-gathers it.
// Parameters per rank: o_r * (in + 1), about 1/T of the Linear's.
//
// Initialization takes rank r's rows of a full nn::Linear, so a seed gives the same full weight
// whatever T is (and the generator advances exactly as for the Linear, so every later layer is
// the same too). A rank holds the full Linear only while the layer is built. state_dict()
// holds the full weight and bias (an all-gather: every rank of the group must call it), and
// load_state_dict() takes this rank's rows of them, so checkpoints move between tensor-parallel
// and single-process runs. Output features need not divide by T (slices.h).
//
// Sequence parallelism (set_sequence_parallel, sequence_parallel_region.h): the input is this
// rank's S/T tokens [B, S/T, in], all-gathered along the sequence in forward (and its gradient
// reduce-scattered in backward) instead of f's identity and all-reduce.
//
// Split by heads (heads(): GPT-2's c_attn, Linear(C, 3C) whose outputs are q | k | v): each of
// the 3 chunks is split over the ranks on its own, so rank r holds the rows of its heads in
// each, n_head / T heads of D = C / n_head features:
//
//     weight [3C, C]:   q rows [0, C)      k rows [C, 2C)      v rows [2C, 3C)
//     rank r holds      [rC/T, (r+1)C/T) + [C + rC/T, ...)  +  [2C + rC/T, ...)   -> [3C/T, C]
//
// and its output is q_r | k_r | v_r, the input of the attention over its heads. Megatron-LM
// requires n_head % T == 0 (a head is never cut), and so does heads(). state_dict() holds the
// full weight in the original row order (an all-gather, then each chunk's slices put back
// together), and load_state_dict() takes this rank's rows of each chunk.
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "dist/tensor_parallel/slices.h"
#include "nn/linear.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

class ColumnParallelLinear : public nn::Module {
 public:
  // This rank's rows of `full` (every rank of `group` passes the same full Linear).
  ColumnParallelLinear(const nn::Linear& full, std::shared_ptr<ProcessGroup> group,
                       bool gather_output = false);
  // Draws the full Linear(in_features, out_features) from the default generator, as
  // nn::Linear would, and keeps this rank's rows.
  ColumnParallelLinear(int64_t in_features, int64_t out_features,
                       std::shared_ptr<ProcessGroup> group, bool gather_output = false);
  // A Linear(C, 3C) whose output features are q | k | v of n_head heads (c_attn), split by
  // heads: rank r's rows of each chunk. n_head must divide by the group's size and C by n_head.
  static std::shared_ptr<ColumnParallelLinear> heads(const nn::Linear& full,
                                                     std::shared_ptr<ProcessGroup> group,
                                                     int64_t n_head);

  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  // This rank's output features: [start, start + length) of out_features(), or of each chunk
  // when the output is chunks() blocks split on their own (heads(): 3).
  Slice output_slice() const { return output_slice_; }
  int64_t chunks() const { return chunks_; }
  const Variable& weight() const { return weight_; }  // [length, in]
  const Variable& bias() const { return bias_; }      // [length], undefined without bias
  const std::shared_ptr<ProcessGroup>& group() const { return group_; }
  // True when the output is all-gathered (full on every rank), false when it stays split.
  bool gathers_output() const { return gather_output_; }
  // Sequence parallelism: the input [B, S/T, in] is this rank's tokens, gathered before the
  // product (g) rather than copied (f).
  void set_sequence_parallel(bool on) { sequence_parallel_ = on; }
  bool sequence_parallel() const { return sequence_parallel_; }

 protected:
  std::vector<StateEntry> own_state_entries() const override;
  void save_own_state(const std::string& prefix, StateDict& out) const override;
  void load_own_state(const std::string& prefix, const StateDict& state) override;

 private:
  ColumnParallelLinear(const nn::Linear& full, std::shared_ptr<ProcessGroup> group,
                       bool gather_output, int64_t chunks);

  std::shared_ptr<ProcessGroup> group_;
  int64_t in_features_, out_features_;
  int64_t chunks_;
  Slice output_slice_;
  bool gather_output_;
  bool sequence_parallel_ = false;
  Variable weight_, bias_;
};

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
