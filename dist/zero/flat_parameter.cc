#include "dist/zero/flat_parameter.h"

#include <algorithm>
#include <optional>

#include "autograd/grad_mode.h"
#include "dist/trace_recorder.h"
#include "dist/zero/flat_gradients.h"
#include "optim/clip_grad.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

FlatParameter::FlatParameter(std::vector<std::pair<std::string, Variable>> params,
                             std::shared_ptr<ProcessGroup> group, std::string name,
                             const MixedPrecision& precision, std::vector<bool> keep_dtype)
    : params_(std::move(params)), group_(std::move(group)), name_(std::move(name)) {
  TS_CHECK(group_ != nullptr, "FlatParameter ", name_, ": group is null");
  TS_CHECK(!params_.empty(), "FlatParameter ", name_, ": a unit needs at least one parameter");
  dtype_ = params_[0].second.dtype();
  device_ = params_[0].second.device();
  std::vector<int64_t> numels;
  for (const auto& [pname, p] : params_) {
    TS_CHECK(p.is_leaf() && p.requires_grad() && is_floating(p.dtype()), "FlatParameter ", name_,
             ": parameter ", pname, " must be a floating-point leaf that requires grad");
    TS_CHECK(p.dtype() == dtype_ && p.device() == device_, "FlatParameter ", name_,
             ": parameter ", pname, " is ", p.dtype(), " on ", p.device(), " but ",
             params_[0].first, " is ", dtype_, " on ", device_, " (one flat buffer, one dtype)");
    numels.push_back(p.numel());
    shapes_.push_back(p.shape());
  }
  layout_ = zero::flat_layout(numels);
  padded_ = zero::padded_size(layout_.total, group_->size());
  ready_.assign(params_.size(), false);

  // Mixed precision: each parameter's compute dtype; the gather carries the common one (the
  // parameters' own when they differ, the lowered ones cast after it); gradients are averaged
  // in reduce_dtype when any parameter is lowered.
  TS_CHECK(keep_dtype.empty() || keep_dtype.size() == params_.size(), "FlatParameter ", name_,
           ": keep_dtype has ", keep_dtype.size(), " entries for ", params_.size(), " parameters");
  TS_CHECK(!precision.enabled() || dtype_ != kF64, "FlatParameter ", name_, ": mixed precision "
           "needs f32/f16/bf16 parameters, got f64");
  for (size_t i = 0; i < params_.size(); ++i) {
    const bool keep = !precision.enabled() || (!keep_dtype.empty() && keep_dtype[i]);
    compute_dtypes_.push_back(keep ? dtype_ : *precision.param_dtype());
    lowered_ = lowered_ || compute_dtypes_.back() != dtype_;
  }
  const bool uniform = std::all_of(compute_dtypes_.begin(), compute_dtypes_.end(),
                                   [&](DType d) { return d == compute_dtypes_[0]; });
  gather_dtype_ = uniform ? compute_dtypes_[0] : dtype_;
  reduce_dtype_ = !lowered_ ? dtype_
                  : precision.reduce_dtype() ? *precision.reduce_dtype()
                                             : *precision.param_dtype();

  NoGradGuard no_grad;
  Tensor flat = zeros({padded_}, TensorOptions(dtype_).device(device_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::Range& r = layout_.ranges[i];
    flat.narrow(0, r.begin, r.size()).copy_(params_[i].second.data().reshape({-1}));
  }
  const DType master = dtype_ == kF64 ? kF64 : kF32;
  shard_ = Variable(flat.narrow(0, group_->rank() * shard_numel(), shard_numel()).to(master).clone(),
                    /*requires_grad=*/true);
  shard_.set_name(name_ + ".flat_param_shard");
  // Between its unit's uses each parameter is absent: its shape and dtype, no bytes, and a read
  // (a module called as m->forward(x), skipping the hooks that gather it; the model used
  // without the wrapper) is an error saying so instead of computing with something else.
  for (size_t i = 0; i < params_.size(); ++i) {
    absent_.push_back(absent(
        shapes_[i], TensorOptions(compute_dtypes_[i]).device(device_),
        detail::str("it is parameter '", params_[i].first, "' (", shapes_[i], " ",
                    compute_dtypes_[i], ") of FullyShardedDataParallel's ", name_) +
            ", which holds it whole only from its module's forward hooks to the end of its "
            "forward, and in its backward: call the module as (*module)(x), which runs the "
            "hooks, not module->forward(x), and run the model through the wrapper"));
  }
  // The parameters keep their full values until here; from now on only the shard exists.
  full_ = flat;
  reshard();
}

std::vector<int64_t> FlatParameter::counts() const {
  return std::vector<int64_t>(group_->size(), shard_numel());
}

void FlatParameter::offload(std::shared_ptr<offload::ShardHome> home) {
  TS_CHECK(home != nullptr && home_ == nullptr, "FlatParameter ", name_,
           ": offload() takes one home, once");
  TS_CHECK(home->numel() == shard_numel(), "FlatParameter ", name_, ": a home of ",
           home->numel(), " elements for a shard of ", shard_numel());
  TS_CHECK(work_ == nullptr && !full_.defined(), "FlatParameter ", name_,
           ": offload() while gathered or reducing");
  home_ = std::move(home);
  home_->take_from(shard_);
}

void FlatParameter::prefetch_values() {
  if (home_ != nullptr && home_->values_offloaded() && !full_.defined()) home_->prefetch(false);
}

Tensor FlatParameter::shard_values() const {
  return home_ != nullptr && home_->values_offloaded() ? home_->read_values() : shard_.data();
}

void FlatParameter::set_shard_values(const Tensor& values) {
  TS_CHECK(values.numel() == shard_numel(), "FlatParameter ", name_, ": ", values.numel(),
           " values for a shard of ", shard_numel());
  NoGradGuard no_grad;
  if (home_ != nullptr && home_->values_offloaded()) {
    home_->write_values(values.to(shard_.dtype()).reshape({-1}));
  } else {
    Tensor(shard_.data()).copy_(values.reshape({-1}));
  }
}

void FlatParameter::launch_gather_in(DType dtype) {
  NoGradGuard no_grad;
  // Offloaded, the shard is read from its home first (a few pieces in flight at once).
  const Tensor values = shard_values();
  full_ = empty({padded_}, TensorOptions(dtype).device(device_));
  // The master shard is cast before the all-gather: what travels is what the unit computes in.
  const Tensor mine = values.to(dtype).contiguous();
  if (trace::recording()) {
    trace::CollectiveLabel label("all_gather " + name_, "all_gather", trace_args());
    gather_work_ = group_->all_gather(mine, full_, counts());
  } else {
    gather_work_ = group_->all_gather(mine, full_, counts());
  }
}

std::string FlatParameter::trace_args() const {
  return "\"unit\":\"" + name_ + "\",\"elements\":" + std::to_string(padded_);
}

void FlatParameter::launch_gather() {
  if (full_.defined()) return;  // gathered, or gathering
  launch_gather_in(gather_dtype_);
  full_precision_ = false;
}

void FlatParameter::gather(GatherPrecision precision) {
  const bool full = precision == GatherPrecision::kFull;
  // Gathered the other way (a state dict between steps): start again in the dtype asked for.
  if (full_.defined() && full != full_precision_ && lowered_) reshard();
  if (gathered()) return;
  if (!full_.defined()) {
    launch_gather_in(full ? dtype_ : gather_dtype_);
    full_precision_ = full;
  }
  gather_work_->wait();
  gather_work_ = nullptr;
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::Range& r = layout_.ranges[i];
    const Tensor view = full_.narrow(0, r.begin, r.size()).view(shapes_[i]);
    const DType want = full_precision_ ? dtype_ : compute_dtypes_[i];
    // A cast (a parameter of a unit gathered in another dtype) is owned by the parameter alone
    // and freed with the unit at reshard().
    params_[i].second.set_data(view.dtype() == want ? view : view.to(want));
  }
}

void FlatParameter::reshard() {
  if (!full_.defined()) return;
  if (gather_work_ != nullptr) {
    gather_work_->wait();
    gather_work_ = nullptr;
  }
  // The parameters' views are the only other owners of the buffer's storage: once they point
  // elsewhere, dropping full_ returns the memory to the allocator.
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].second.set_data(absent_[i]);
  }
  full_ = Tensor();
  full_precision_ = false;
  if (trace::recording()) trace::TraceRecorder::global().instant("free " + name_, "free", trace_args());
}

void FlatParameter::update_shard_from_gathered() {
  TS_CHECK(gathered() && (full_precision_ || !lowered_), "FlatParameter ", name_,
           ": update_shard_from_gathered needs the unit gathered with GatherPrecision::kFull (a "
           "gather in ", gather_dtype_, " may round the ", shard_.dtype(), " master)");
  set_shard_values(full_.narrow(0, group_->rank() * shard_numel(), shard_numel()));
}

bool FlatParameter::grad_ready(size_t index) {
  TS_CHECK(index < params_.size(), "FlatParameter ", name_, ": parameter index ", index,
           " out of range for ", params_.size());
  const Variable& p = params_[index].second;
  TS_CHECK(!ready_[index], "FlatParameter ", name_, ": parameter ", params_[index].first,
           " received a second gradient in one backward after its unit's gradients were "
           "reduced");
  TS_CHECK(!reduce_scatter_pending(), "FlatParameter ", name_, ": parameter ",
           params_[index].first, " received a gradient after the unit was reduce-scattered");
  if (!grad_flat_.defined()) {
    grad_flat_ = zeros({padded_}, TensorOptions(reduce_dtype_).device(device_));
  }
  const zero::Range& r = layout_.ranges[index];
  zero::move_grad_into(p, grad_flat_.narrow(0, r.begin, r.size()));
  ready_[index] = true;
  return ++ready_count_ == params_.size();
}

void FlatParameter::launch_reduce_scatter() {
  TS_CHECK(!reduce_scatter_pending(), "FlatParameter ", name_,
           ": a reduce-scatter is already in flight");
  NoGradGuard no_grad;
  // Parameters that did not report in this backward contribute zeros.
  if (!grad_flat_.defined()) {
    grad_flat_ = zeros({padded_}, TensorOptions(reduce_dtype_).device(device_));
  }
  reduced_ = empty({shard_numel()}, TensorOptions(reduce_dtype_).device(device_));
  std::optional<trace::CollectiveLabel> label;
  if (trace::recording()) label.emplace("reduce_scatter " + name_, "reduce_scatter", trace_args());
  if (is_half(reduce_dtype_)) {
    // Divided before the half-precision sum, so N ranks' (loss-scaled) gradients stay in range.
    mul_(grad_flat_, 1.0 / group_->size());
    work_ = group_->reduce_scatter(grad_flat_, reduced_, counts(), ReduceOp::kSum);
  } else {
    work_ = group_->reduce_scatter(grad_flat_, reduced_, counts(), ReduceOp::kMean);
  }
  ready_.assign(params_.size(), false);
  ready_count_ = 0;
}

double FlatParameter::gradient_squared_sum() const {
  if (home_ != nullptr && home_->gradients_offloaded()) return home_->gradient_squared_sum();
  return shard_.grad().defined() ? optim::squared_sum(shard_.grad()) : 0.0;
}

void FlatParameter::scale_gradient(double factor) {
  NoGradGuard no_grad;
  if (home_ != nullptr && home_->gradients_offloaded()) {
    if (!home_->has_gradient()) return;
    Tensor g = home_->read_gradient();
    mul_(g, factor);
    home_->write_gradient(g);
  } else if (shard_.grad().defined()) {
    Tensor g = shard_.grad();
    mul_(g, factor);
  }
}

void FlatParameter::finish_reduce_scatter() {
  if (work_ == nullptr) return;
  NoGradGuard no_grad;
  work_->wait();
  work_ = nullptr;
  const Tensor part = reduced_.to(shard_.dtype());
  if (home_ != nullptr && home_->gradients_offloaded()) {
    // Written to the home (added to the gradient there: accumulation across backward calls).
    if (home_->has_gradient()) {
      Tensor g = home_->read_gradient();
      add_(g, part);
      home_->write_gradient(g);
    } else {
      home_->write_gradient(part);
    }
  } else if (!shard_.grad().defined()) {
    // reduced_ is dropped below and nothing else holds its storage (the finished work has
    // released it), so the gradient takes it over: no second shard-sized buffer in backward.
    shard_.set_grad(part);
  } else {
    Tensor g = shard_.grad();
    add_(g, part);
  }
  grad_flat_ = Tensor();
  reduced_ = Tensor();
}

}  // namespace dist
}  // namespace tessera
