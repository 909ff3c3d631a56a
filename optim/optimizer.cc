#include "optim/optimizer.h"

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

Optimizer::Optimizer(std::unique_ptr<OptimizerOptions> defaults) : defaults_(std::move(defaults)) {}

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
  if (!group.options) {
    TS_CHECK(defaults_ != nullptr, "Optimizer: a parameter group without options, and no defaults");
    group.options = defaults_->clone();
  }
  groups_.push_back(std::move(group));
}

std::vector<Variable> Optimizer::parameters() const {
  std::vector<Variable> out;
  for (const ParamGroup& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const ParamGroup& g : groups_) {
    for (const Variable& p : g.params) p.zero_grad(set_to_none);
  }
}

void Optimizer::save_param_groups(StateDict& out) const {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& [name, value] : groups_[gi].options->values()) {
      out.set("param_groups." + std::to_string(gi) + "." + name, scalar_tensor(value, kF64));
    }
  }
}

void Optimizer::load_param_groups(const StateDict& state) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& [name, value] : groups_[gi].options->values()) {
      const std::string key = "param_groups." + std::to_string(gi) + "." + name;
      TS_CHECK(state.contains(key), "Optimizer::load_state_dict: missing '", key,
               "' (was the state saved from an optimizer with the same groups?)");
      groups_[gi].options->set(name, state.at(key).item());
    }
  }
}

}  // namespace optim
}  // namespace tessera
