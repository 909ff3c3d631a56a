#include "dist/tensor_parallel/column_parallel_linear.h"

#include "autograd/functions.h"
#include "autograd/recompute.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "dist/tensor_parallel/sequence_parallel_region.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

namespace {
constexpr const char* kOutputFeatures = "ColumnParallelLinear: output features";
}  // namespace

ColumnParallelLinear::ColumnParallelLinear(const nn::Linear& full,
                                           std::shared_ptr<ProcessGroup> group,
                                           bool gather_output)
    : ColumnParallelLinear(full, std::move(group), gather_output, /*chunks=*/1) {}

ColumnParallelLinear::ColumnParallelLinear(const nn::Linear& full,
                                           std::shared_ptr<ProcessGroup> group,
                                           bool gather_output, int64_t chunks)
    : group_(std::move(group)),
      in_features_(full.weight().size(1)),
      out_features_(full.weight().size(0)),
      chunks_(chunks),
      gather_output_(gather_output) {
  TS_CHECK(group_ != nullptr, "ColumnParallelLinear: the tensor-parallel group is null");
  TS_CHECK(chunks_ >= 1 && out_features_ % chunks_ == 0, "ColumnParallelLinear: ",
           out_features_, " output features are not ", chunks_, " equal chunks");
  // A gathered output would be q_0 k_0 v_0 q_1 ..., not q | k | v: chunked outputs stay split.
  TS_CHECK(chunks_ == 1 || !gather_output_,
           "ColumnParallelLinear: an output of several chunks cannot be gathered");
  output_slice_ = slice_of(out_features_ / chunks_, group_->size(), group_->rank(),
                           kOutputFeatures);
  weight_ = register_parameter(
      "weight", local_chunk_slices(full.weight().data(), 0, chunks_, *group_, kOutputFeatures));
  if (full.bias().defined()) {
    bias_ = register_parameter(
        "bias", local_chunk_slices(full.bias().data(), 0, chunks_, *group_, kOutputFeatures));
  }
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in_features, int64_t out_features,
                                           std::shared_ptr<ProcessGroup> group,
                                           bool gather_output)
    : ColumnParallelLinear(nn::Linear(in_features, out_features), std::move(group),
                           gather_output) {}

std::shared_ptr<ColumnParallelLinear> ColumnParallelLinear::heads(
    const nn::Linear& full, std::shared_ptr<ProcessGroup> group, int64_t n_head) {
  TS_CHECK(group != nullptr, "ColumnParallelLinear::heads: the tensor-parallel group is null");
  const int64_t t = group->size(), out = full.weight().size(0);
  TS_CHECK(n_head >= 1 && n_head % t == 0, "ColumnParallelLinear::heads: n_head ", n_head,
           " is not divisible by the tensor-parallel size T = ", t,
           " (each rank runs n_head / T whole heads, as Megatron-LM requires)");
  TS_CHECK(out % 3 == 0 && (out / 3) % n_head == 0, "ColumnParallelLinear::heads: ", out,
           " output features are not q | k | v of ", n_head, " heads");
  return std::shared_ptr<ColumnParallelLinear>(
      new ColumnParallelLinear(full, std::move(group), /*gather_output=*/false, /*chunks=*/3));
}

std::string ColumnParallelLinear::extra_repr() const {
  return detail::str("in_features=", in_features_, ", out_features=", out_features_,
                     ", this rank's=[", output_slice_.start, ", ", output_slice_.end(),
                     chunks_ > 1 ? detail::str(") of each of ", chunks_, " chunks") : std::string(")"),
                     ", bias=", bias_.defined() ? "true" : "false",
                     ", gather_output=", gather_output_ ? "true" : "false",
                     sequence_parallel_ ? ", sequence_parallel=true" : "");
}

Variable ColumnParallelLinear::forward(const Variable& x) {
  TS_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "ColumnParallelLinear::forward: expected ",
           in_features_, " input features, got shape ", x.shape());
  const UnaryFn product = [this](const Variable& input) {
    const Variable y = linear(input, weight_, bias_);
    return gather_output_ ? gather_from_parallel_region(y, -1, group_) : y;
  };
  if (!sequence_parallel_) return product(copy_to_parallel_region(x, group_));
  // The weight's gradient needs the gathered [.., S, in] input; Megatron-LM keeps this rank's
  // S/T tokens instead and all-gathers them again in backward (Korthikanti et al. 2022, 4.2.3).
  return recompute_output(
      [group = group_](const Variable& v) { return gather_from_sequence_parallel_region(v, group); },
      x, product);
}

std::vector<nn::Module::StateEntry> ColumnParallelLinear::own_state_entries() const {
  std::vector<StateEntry> entries = {{"weight", {out_features_, in_features_}, weight_.dtype()}};
  if (bias_.defined()) entries.push_back({"bias", {out_features_}, bias_.dtype()});
  return entries;
}

void ColumnParallelLinear::save_own_state(const std::string& prefix, StateDict& out) const {
  const std::vector<int64_t> rows =
      slice_lengths(out_features_ / chunks_, group_->size(), kOutputFeatures);
  out.set(prefix + "weight", all_gather_chunks(weight_.data(), 0, chunks_, rows, *group_));
  if (bias_.defined()) {
    out.set(prefix + "bias", all_gather_chunks(bias_.data(), 0, chunks_, rows, *group_));
  }
}

void ColumnParallelLinear::load_own_state(const std::string& prefix, const StateDict& state) {
  if (const Tensor* w = state.find(prefix + "weight")) {
    Tensor(weight_.data()).copy_(local_chunk_slices(*w, 0, chunks_, *group_, kOutputFeatures));
  }
  if (bias_.defined()) {
    if (const Tensor* b = state.find(prefix + "bias")) {
      Tensor(bias_.data()).copy_(local_chunk_slices(*b, 0, chunks_, *group_, kOutputFeatures));
    }
  }
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
