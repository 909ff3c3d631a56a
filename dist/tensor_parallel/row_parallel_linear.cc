#include "dist/tensor_parallel/row_parallel_linear.h"

#include "autograd/functions.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/sequence_parallel_region.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {
constexpr const char* kInputFeatures = "RowParallelLinear: input features";
}  // namespace

RowParallelLinear::RowParallelLinear(const nn::Linear& full, std::shared_ptr<ProcessGroup> group,
                                     bool input_is_parallel)
    : group_(std::move(group)),
      in_features_(full.weight().size(1)),
      out_features_(full.weight().size(0)),
      input_is_parallel_(input_is_parallel) {
  TS_CHECK(group_ != nullptr, "RowParallelLinear: the tensor-parallel group is null");
  input_slice_ = slice_of(in_features_, group_->size(), group_->rank(), kInputFeatures);
  weight_ = register_parameter("weight",
                               local_slice(full.weight().data(), 1, *group_, kInputFeatures));
  if (full.bias().defined()) bias_ = register_parameter("bias", full.bias().data().clone());
}

RowParallelLinear::RowParallelLinear(int64_t in_features, int64_t out_features,
                                     std::shared_ptr<ProcessGroup> group, bool input_is_parallel)
    : RowParallelLinear(nn::Linear(in_features, out_features), std::move(group),
                        input_is_parallel) {}

std::string RowParallelLinear::extra_repr() const {
  return detail::str("in_features=", in_features_, ", out_features=", out_features_,
                     ", this rank's=[", input_slice_.start, ", ", input_slice_.end(),
                     "), bias=", bias_.defined() ? "true" : "false",
                     ", input_is_parallel=", input_is_parallel_ ? "true" : "false",
                     sequence_parallel_ ? ", sequence_parallel=true" : "");
}

Variable RowParallelLinear::forward(const Variable& x) {
  const int64_t expected = input_is_parallel_ ? input_slice_.length : in_features_;
  TS_CHECK(x.dim() >= 1 && x.size(-1) == expected, "RowParallelLinear::forward: expected ",
           expected, input_is_parallel_ ? " input features (this rank's slice of " : " input features (of ",
           in_features_, "), got shape ", x.shape());
  const Variable x_r = input_is_parallel_ ? x : scatter_to_parallel_region(x, -1, group_);
  const Variable partial = linear(x_r, weight_, Variable());
  const Variable y = sequence_parallel_ ? reduce_scatter_to_sequence_parallel_region(partial, group_)
                                        : reduce_from_parallel_region(partial, group_);
  return bias_.defined() ? add(y, bias_) : y;
}

std::vector<nn::Module::StateEntry> RowParallelLinear::own_state_entries() const {
  std::vector<StateEntry> entries = {{"weight", {out_features_, in_features_}, weight_.dtype()}};
  if (bias_.defined()) entries.push_back({"bias", {out_features_}, bias_.dtype()});
  return entries;
}

void RowParallelLinear::save_own_state(const std::string& prefix, StateDict& out) const {
  const std::vector<int64_t> columns = slice_lengths(in_features_, group_->size(), kInputFeatures);
  out.set(prefix + "weight", all_gather_along(weight_.data(), 1, columns, *group_));
  if (bias_.defined()) out.set(prefix + "bias", bias_.data());
}

void RowParallelLinear::load_own_state(const std::string& prefix, const StateDict& state) {
  if (const Tensor* w = state.find(prefix + "weight")) {
    Tensor(weight_.data()).copy_(local_slice(*w, 1, *group_, kInputFeatures));
  }
  if (bias_.defined()) {
    if (const Tensor* b = state.find(prefix + "bias")) Tensor(bias_.data()).copy_(*b);
  }
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
