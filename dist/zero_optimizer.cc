#include "dist/zero_optimizer.h"

#include <algorithm>
#include <numeric>

#include "autograd/grad_mode.h"
#include "dist/device_groups.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Variable> params,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const OptimizerFactory& make_optimizer,
                                                 bool use_device_group)
    : params_(std::move(params)), group_(std::move(group)) {
  TS_CHECK(group_ != nullptr, "ZeroRedundancyOptimizer: group is null");
  TS_CHECK(!params_.empty(), "ZeroRedundancyOptimizer: no parameters");
  const Device device = params_[0].data().device();
  for (const Variable& p : params_) {
    TS_CHECK(p.data().device() == device, "ZeroRedundancyOptimizer: parameter ", p.name(),
             " is on ", p.data().device(), ", the first on ", device, " (one device per rank)");
  }
  device_ = device;
  comm_ = use_device_group ? group_for_device(group_, device) : group_;
  for (const Variable& p : params_) {
    TS_CHECK(is_floating(p.dtype()) && p.is_leaf() && p.requires_grad(),
             "ZeroRedundancyOptimizer: parameter ", p.name(),
             " must be a floating-point leaf that requires grad (frozen parameters would still be "
             "changed by weight decay)");
    param_offsets_.push_back(total_);
    total_ += p.numel();
  }
  flat_dtype_ = std::all_of(params_.begin(), params_.end(),
                            [](const Variable& p) { return p.dtype() == kF64; })
                    ? kF64
                    : kF32;
  counts_ = balanced_counts(total_, group_->size());
  offsets_.assign(counts_.size(), 0);
  std::partial_sum(counts_.begin(), counts_.end() - 1, offsets_.begin() + 1);
  // The shard starts from this rank's current parameter values (identical on every rank after
  // DDP-style broadcasting; the caller is responsible for that).
  Tensor flat = empty({total_}, flat_options());
  for (size_t i = 0; i < params_.size(); ++i) {
    flat.narrow(0, param_offsets_[i], params_[i].numel()).copy_(params_[i].data().reshape({-1}));
  }
  shard_ = Variable(flat.narrow(0, shard_offset(), shard_numel()).clone(), true);
  shard_.set_name("zero_shard");
  inner_ = make_optimizer({shard_});
  TS_CHECK(inner_ != nullptr, "ZeroRedundancyOptimizer: the factory returned no optimizer");
}

Tensor ZeroRedundancyOptimizer::flatten_grads() const {
  Tensor flat = zeros({total_}, flat_options());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& g = params_[i].grad();
    if (g.defined()) flat.narrow(0, param_offsets_[i], params_[i].numel()).copy_(g.reshape({-1}));
  }
  return flat;
}

void ZeroRedundancyOptimizer::scatter_into_params(const Tensor& flat) {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor(params_[i].data()).copy_(flat.narrow(0, param_offsets_[i], params_[i].numel())
                                        .view(params_[i].shape()));
  }
}

void ZeroRedundancyOptimizer::refresh_shard_from_params() {
  const int64_t begin = shard_offset(), end = begin + shard_numel();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Variable& p = params_[i];
    if (p.dtype() != kF32 && p.dtype() != kF64) continue;  // f16/bf16: the shard is the master
    const int64_t lo = std::max(begin, param_offsets_[i]);
    const int64_t hi = std::min(end, param_offsets_[i] + p.numel());
    if (lo >= hi) continue;
    shard_.data().narrow(0, lo - begin, hi - lo)
        .copy_(p.data().reshape({-1}).narrow(0, lo - param_offsets_[i], hi - lo));
  }
}

void ZeroRedundancyOptimizer::step() {
  NoGradGuard no_grad;
  refresh_shard_from_params();
  // 1. This rank's shard of the averaged gradient.
  Tensor shard_grad = empty({shard_numel()}, flat_options());
  comm_->reduce_scatter(flatten_grads(), shard_grad, counts_, ReduceOp::kAvg)->wait();
  shard_.set_grad(shard_grad);
  // 2. The wrapped optimizer updates the shard (and only holds state for it).
  inner_->step();
  // 3. Everyone gets every shard back.
  Tensor flat = empty({total_}, flat_options());
  comm_->all_gather(shard_.data(), flat, counts_)->wait();
  scatter_into_params(flat);
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  for (const Variable& p : params_) p.zero_grad(set_to_none);
  shard_.zero_grad(set_to_none);
}

int64_t ZeroRedundancyOptimizer::state_bytes() const { return inner_->state_bytes(); }

StateDict ZeroRedundancyOptimizer::consolidated_state_dict() {
  const StateDict local = inner_->state_dict();
  StateDict full;
  for (const auto& [name, t] : local) {
    if (name.rfind("param_groups.", 0) == 0) full.set(name, t);
  }
  // Ranks that have not stepped yet have no state entries; all ranks step together, so the
  // presence of "state.0.step" is the same everywhere.
  const Tensor* step = local.find("state.0.step");
  if (step == nullptr) return full;
  std::vector<std::string> names;
  for (const auto& [name, t] : local) {
    if (name.rfind("state.0.", 0) == 0 && name != "state.0.step") names.push_back(name.substr(8));
  }
  std::vector<std::pair<std::string, Tensor>> gathered;
  for (const std::string& name : names) {
    Tensor flat = empty({total_}, flat_options());
    group_->all_gather(local.at("state.0." + name).to(flat_dtype_).contiguous(), flat, counts_)->wait();
    gathered.emplace_back(name, flat);
  }
  Tensor master;
  const bool has_master = std::any_of(params_.begin(), params_.end(), [](const Variable& p) {
    return p.dtype() == kF16 || p.dtype() == kBF16;
  });
  if (has_master) {
    master = empty({total_}, TensorOptions(kF32).device(device_));
    group_->all_gather(shard_.data(), master, counts_)->wait();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = "state." + std::to_string(i) + ".";
    full.set(prefix + "step", step->clone());
    for (const auto& [name, flat] : gathered) {
      full.set(prefix + name,
               flat.narrow(0, param_offsets_[i], params_[i].numel()).view(params_[i].shape()).clone());
    }
    const bool low = params_[i].dtype() == kF16 || params_[i].dtype() == kBF16;
    if (low) {
      full.set(prefix + "master",
               master.narrow(0, param_offsets_[i], params_[i].numel()).view(params_[i].shape()).clone());
    }
  }
  return full;
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& full) {
  StateDict local;
  for (const auto& [name, t] : full) {
    if (name.rfind("param_groups.", 0) == 0) local.set(name, t);
  }
  if (full.contains("state.0.step")) {
    local.set("state.0.step", full.at("state.0.step"));
    std::vector<std::string> names;
    for (const auto& [name, t] : full.with_prefix_removed("state.0.")) {
      if (name != "step" && name != "master") names.push_back(name);
    }
    for (const std::string& name : names) {
      Tensor flat = empty({total_}, flat_options());
      for (size_t i = 0; i < params_.size(); ++i) {
        const std::string key = "state." + std::to_string(i) + "." + name;
        TS_CHECK(full.contains(key), "ZeroRedundancyOptimizer::load_state_dict: missing '", key, "'");
        const Tensor& t = full.at(key);
        TS_CHECK(t.numel() == params_[i].numel(), "ZeroRedundancyOptimizer::load_state_dict: '",
                 key, "' has shape ", t.shape(), " but parameter ", i, " has ", params_[i].shape());
        flat.narrow(0, param_offsets_[i], params_[i].numel()).copy_(t.reshape({-1}));
      }
      local.set("state.0." + name, flat.narrow(0, shard_offset(), shard_numel()).clone());
    }
    if (full.contains("state.0.master")) {
      Tensor flat = empty({total_}, TensorOptions(kF32).device(device_));
      for (size_t i = 0; i < params_.size(); ++i) {
        const std::string key = "state." + std::to_string(i) + ".master";
        const Tensor* t = full.find(key);
        const Tensor source = t != nullptr ? *t : params_[i].data();
        flat.narrow(0, param_offsets_[i], params_[i].numel()).copy_(source.reshape({-1}));
      }
      Tensor(shard_.data()).copy_(flat.narrow(0, shard_offset(), shard_numel()));
    }
  }
  inner_->load_state_dict(local);
}

}  // namespace dist
}  // namespace tessera
