#include "dist/zero/flat_parameter.h"

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

FlatParameter::FlatParameter(std::vector<std::pair<std::string, Variable>> params,
                             std::shared_ptr<ProcessGroup> group, std::string name)
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
  // The parameters keep their full values until here; from now on only the shard exists.
  full_ = flat;
  reshard();
}

std::vector<int64_t> FlatParameter::counts() const {
  return std::vector<int64_t>(group_->size(), shard_numel());
}

void FlatParameter::launch_gather() {
  if (full_.defined()) return;  // gathered, or gathering
  NoGradGuard no_grad;
  full_ = empty({padded_}, TensorOptions(dtype_).device(device_));
  const Tensor mine = shard_.data().to(dtype_).contiguous();
  gather_work_ = group_->all_gather(mine, full_, counts());
}

void FlatParameter::gather() {
  if (gathered()) return;
  launch_gather();
  gather_work_->wait();
  gather_work_ = nullptr;
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::Range& r = layout_.ranges[i];
    params_[i].second.set_data(full_.narrow(0, r.begin, r.size()).view(shapes_[i]));
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
  const Tensor nothing = empty({0}, TensorOptions(dtype_).device(device_));
  for (auto& [pname, p] : params_) p.set_data(nothing);
  full_ = Tensor();
}

void FlatParameter::update_shard_from_gathered() {
  TS_CHECK(gathered(), "FlatParameter ", name_, ": update_shard_from_gathered needs the unit "
           "gathered");
  NoGradGuard no_grad;
  Tensor(shard_.data()).copy_(full_.narrow(0, group_->rank() * shard_numel(), shard_numel()));
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
  if (!grad_flat_.defined()) grad_flat_ = zeros({padded_}, TensorOptions(dtype_).device(device_));
  const zero::Range& r = layout_.ranges[index];
  if (p.grad().defined()) {
    grad_flat_.narrow(0, r.begin, r.size()).copy_(p.grad().reshape({-1}));
  }
  // The gradient lives in the flat buffer now: release the parameter's own copy.
  p.zero_grad(/*set_to_none=*/true);
  ready_[index] = true;
  return ++ready_count_ == params_.size();
}

void FlatParameter::launch_reduce_scatter() {
  TS_CHECK(!reduce_scatter_pending(), "FlatParameter ", name_,
           ": a reduce-scatter is already in flight");
  NoGradGuard no_grad;
  // Parameters that did not report in this backward contribute zeros.
  if (!grad_flat_.defined()) grad_flat_ = zeros({padded_}, TensorOptions(dtype_).device(device_));
  reduced_ = empty({shard_numel()}, TensorOptions(dtype_).device(device_));
  work_ = group_->reduce_scatter(grad_flat_, reduced_, counts(), ReduceOp::kMean);
  ready_.assign(params_.size(), false);
  ready_count_ = 0;
}

void FlatParameter::finish_reduce_scatter() {
  if (work_ == nullptr) return;
  NoGradGuard no_grad;
  work_->wait();
  work_ = nullptr;
  const Tensor part = reduced_.to(shard_.dtype());
  if (!shard_.grad().defined()) {
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
