#include "optim/optimizer.h"

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace optim {

ParamGroup::ParamGroup(const ParamGroup& other)
    : params(other.params), options(other.options ? other.options->clone() : nullptr) {}

ParamGroup& ParamGroup::operator=(const ParamGroup& other) {
  params = other.params;
  options = other.options ? other.options->clone() : nullptr;
  return *this;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Variable& p = group.params[i];
    for (size_t j = 0; j < i; ++j) {
      TS_CHECK(p.defined() && !group.params[j].is_same(p), "Optimizer: parameter ", i, " (",
               p.defined() ? p.name() : "undefined", ") is listed twice in one group");
    }
    TS_CHECK(p.defined() && p.is_leaf(), "Optimizer: parameters must be leaf Variables (",
             p.defined() ? p.name() : "undefined", ")");
    TS_CHECK(is_floating(p.dtype()), "Optimizer: parameter ", p.name(), " is ", p.dtype(),
             ", expected a floating-point tensor");
    for (const ParamGroup& other : groups_) {
      for (const Variable& q : other.params) {
        TS_CHECK(!q.is_same(p), "Optimizer: parameter ", p.name(), " appears in two groups");
      }
    }
  }
  if (!group.options) group.options = defaults_->clone();
  state_.emplace_back(group.params.size());
  groups_.push_back(std::move(group));
}

std::vector<Variable> Optimizer::parameters() const {
  std::vector<Variable> out;
  for (const ParamGroup& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    std::vector<PendingUpdate> updates;
    std::vector<size_t> low_precision;  // indices into group.params whose master is updated
    for (size_t pi = 0; pi < group.params.size(); ++pi) {
      const Variable& p = group.params[pi];
      if (!p.grad().defined()) continue;
      ParamState& state = state_[gi][pi];
      const bool low = p.dtype() == kF16 || p.dtype() == kBF16;
      if (low && !state.tensors.count("master")) {
        state.tensors["master"] = p.data().to(kF32).contiguous().clone();
      }
      const Tensor target = low ? state.tensors["master"] : p.data();
      TS_CHECK(target.is_contiguous(), "Optimizer: parameter ", p.name(),
               " is not contiguous; optimizers update parameters in place");
      ++state.step;
      updates.push_back({&state, target, p.grad().to(target.dtype()).contiguous()});
      if (low) low_precision.push_back(pi);
    }
    update_group(*group.options, updates);
    for (size_t pi : low_precision) {
      Tensor(group.params[pi].data()).copy_(state_[gi][pi].tensors["master"]);
    }
  }
}

void Optimizer::update_group(const OptimizerOptions& options,
                             std::vector<PendingUpdate>& updates) {
  for (PendingUpdate& u : updates) update(options, *u.state, u.param, u.grad);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const ParamGroup& g : groups_) {
    for (const Variable& p : g.params) p.zero_grad(set_to_none);
  }
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  int64_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& [name, value] : groups_[gi].options->values()) {
      out.set("param_groups." + std::to_string(gi) + "." + name, scalar_tensor(value, kF64));
    }
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi, ++index) {
      const ParamState& s = state_[gi][pi];
      if (s.step == 0) continue;
      const std::string prefix = "state." + std::to_string(index) + ".";
      out.set(prefix + "step", scalar_tensor(static_cast<double>(s.step), kI64));
      for (const auto& [name, t] : s.tensors) out.set(prefix + name, t);
    }
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  int64_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& [name, value] : groups_[gi].options->values()) {
      const std::string key = "param_groups." + std::to_string(gi) + "." + name;
      TS_CHECK(state.contains(key), "Optimizer::load_state_dict: missing '", key,
               "' (was the state saved from an optimizer with the same groups?)");
      groups_[gi].options->set(name, state.at(key).item());
    }
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi, ++index) {
      const std::string prefix = "state." + std::to_string(index) + ".";
      ParamState fresh;
      const StateDict entries = state.with_prefix_removed(prefix);
      for (const auto& [name, t] : entries) {
        if (name == "step") {
          fresh.step = static_cast<int64_t>(t.item());
          continue;
        }
        const Variable& p = groups_[gi].params[pi];
        TS_CHECK(t.shape() == p.shape(), "Optimizer::load_state_dict: '", prefix, name,
                 "' has shape ", t.shape(), " but parameter ", index, " (", p.name(), ") has ",
                 p.shape());
        const DType dtype = name == "master" ? kF32 : (p.dtype() == kF16 || p.dtype() == kBF16
                                                           ? kF32
                                                           : p.dtype());
        fresh.tensors[name] = t.to(dtype).to(p.device()).contiguous().clone();
      }
      state_[gi][pi] = std::move(fresh);
    }
  }
  const int64_t total = index;
  for (const auto& [name, t] : state) {
    if (name.rfind("state.", 0) != 0) continue;
    const int64_t i = std::stoll(name.substr(6, name.find('.', 6) - 6));
    TS_CHECK(i >= 0 && i < total, "Optimizer::load_state_dict: state for parameter ", i,
             " but this optimizer has ", total, " parameters");
  }
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& group : state_) {
    for (const ParamState& s : group) {
      for (const auto& [name, t] : s.tensors) bytes += static_cast<int64_t>(t.nbytes());
    }
  }
  return bytes;
}

}  // namespace optim
}  // namespace tessera
