#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

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
  const char* where = "Optimizer::load_state_dict: ";
  // Every "param_groups." key names an option of an existing group: a key of another form
  // would otherwise be ignored and the option silently keep its current value.
  for (const auto& [key, t] : state) {
    if (key.rfind("param_groups.", 0) != 0) continue;
    const size_t dot = key.find('.', 13);
    const std::string g = key.substr(13, dot == std::string::npos ? std::string::npos : dot - 13);
    const bool numbered = dot != std::string::npos && !g.empty() && g.size() <= 9 &&
                          g.find_first_not_of("0123456789") == std::string::npos &&
                          (g.size() == 1 || g[0] != '0') && std::stoul(g) < groups_.size();
    TS_CHECK(numbered, where, "key '", key,
             "' is not of the form 'param_groups.G.NAME' with G a group index in [0, ",
             groups_.size(), ")");
    const std::string name = key.substr(dot + 1);
    std::vector<std::string> names;
    for (const auto& option : groups_[std::stoul(g)].options->values()) {
      names.push_back(option.first);
    }
    TS_CHECK(std::find(names.begin(), names.end(), name) != names.end(), where, "key '", key,
             "' names no option of this optimizer (its options are ", names, ")");
  }
  // Set copies of the options, so that an error leaves the groups as they were.
  std::vector<std::unique_ptr<OptimizerOptions>> loaded;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    std::unique_ptr<OptimizerOptions> options = groups_[gi].options->clone();
    for (const auto& [name, value] : groups_[gi].options->values()) {
      const std::string key = "param_groups." + std::to_string(gi) + "." + name;
      TS_CHECK(state.contains(key), where, "missing '", key,
               "' (was the state saved from an optimizer with the same groups?)");
      const Tensor& t = state.at(key);
      TS_CHECK(is_floating(t.dtype()) && t.numel() == 1, where, "'", key, "' is a ", t.dtype(),
               " tensor of shape ", t.shape(), ", expected a one-element floating-point tensor");
      const double v = t.item();
      TS_CHECK(std::isfinite(v), where, "'", key, "' is ", v, ", expected a finite value");
      try {
        options->set(name, v);
      } catch (const Error& e) {
        TS_FAIL(where, "'", key, "' = ", v, ": ", e.message());
      }
    }
    loaded.push_back(std::move(options));
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options = std::move(loaded[gi]);
}

}  // namespace optim
}  // namespace tessera
