#include "dist/tensor_parallel/column_parallel_linear.h"

#include "autograd/functions.h"
#include "dist/tensor_parallel/parallel_region.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

ColumnParallelLinear::ColumnParallelLinear(const nn::Linear& full,
                                           std::shared_ptr<ProcessGroup> group,
                                           bool gather_output)
    : group_(std::move(group)),
      in_features_(full.weight().size(1)),
      out_features_(full.weight().size(0)),
      gather_output_(gather_output) {
  TS_CHECK(group_ != nullptr, "ColumnParallelLinear: the tensor-parallel group is null");
  output_slice_ = slice_of(out_features_, group_->size(), group_->rank(),
                           "ColumnParallelLinear: output features");
  weight_ = register_parameter("weight", local_slice(full.weight().data(), 0, *group_,
                                                     "ColumnParallelLinear: output features"));
  if (full.bias().defined()) {
    bias_ = register_parameter("bias", local_slice(full.bias().data(), 0, *group_,
                                                   "ColumnParallelLinear: output features"));
  }
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features,
                                           std::shared_ptr<ProcessGroup> group,
                                           bool gather_output)
    : ColumnParallelLinear(nn::Linear(in_features, out_features), std::move(group),
                           gather_output) {}

std::string ColumnParallelLinear::extra_repr() const {
  return detail::str("in_features=", in_features_, ", out_features=", out_features_,
                     ", this rank's=[", output_slice_.start, ", ", output_slice_.end(),
                     "), bias=", bias_.defined() ? "true" : "false",
                     ", gather_output=", gather_output_ ? "true" : "false");
}

Variable ColumnParallelLinear::forward(const Variable& x) {
  TS_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "ColumnParallelLinear::forward: expected ",
           in_features_, " input features, got shape ", x.shape());
  const Variable y = linear(copy_to_parallel_region(x, group_), weight_, bias_);
  return gather_output_ ? gather_from_parallel_region(y, -1, group_) : y;
}

std::vector<nn::Module::StateEntry> ColumnParallelLinear::own_state_entries() const {
  std::vector<StateEntry> entries = {{"weight", {out_features_, in_features_}, weight_.dtype()}};
  if (bias_.defined()) entries.push_back({"bias", {out_features_}, bias_.dtype()});
  return entries;
}

void ColumnParallelLinear::save_own_state(const std::string& prefix, StateDict& out) const {
  const std::vector<int64_t> rows =
      slice_lengths(out_features_, group_->size(), "ColumnParallelLinear: output features");
  out.set(prefix + "weight", all_gather_along(weight_.data(), 0, rows, *group_));
  if (bias_.defined()) out.set(prefix + "bias", all_gather_along(bias_.data(), 0, rows, *group_));
}

void ColumnParallelLinear::load_own_state(const std::string& prefix, const StateDict& state) {
  const char* what = "ColumnParallelLinear: output features";
  if (const Tensor* w = state.find(prefix + "weight")) {
    Tensor(weight_.data()).copy_(local_slice(*w, 0, *group_, what));
  }
  if (bias_.defined()) {
    if (const Tensor* b = state.find(prefix + "bias")) {
      Tensor(bias_.data()).copy_(local_slice(*b, 0, *group_, what));
    }
  }
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
