#include "dist/zero/wrap_policy.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace zero {

namespace {

using NamedParameters = std::vector<std::pair<std::string, Variable>>;

// The children that become units of their own under units() or min_num_params (FSDP's
// size_based_auto_wrap_policy); the others' parameters go to the root.
std::vector<bool> children_wrapped(const nn::Sequential& model, const FullyShardedOptions& options) {
  const size_t n = model.size();
  std::vector<bool> is_unit(n, false);
  if (options.units().empty()) {
    for (size_t c = 0; c < n; ++c) is_unit[c] = model[c]->num_parameters() >= options.min_num_params();
    return is_unit;
  }
  for (size_t c : options.units()) {
    TS_CHECK(c < n, "FullyShardedDataParallel: unit child ", c, " out of range for a "
             "Sequential of ", n, " children");
    TS_CHECK(!is_unit[c], "FullyShardedDataParallel: child ", c, " listed twice as a unit");
    TS_CHECK(model[c]->num_parameters() > 0, "FullyShardedDataParallel: child ", c, " (",
             model[c]->type_name(), ") has no parameters and cannot be a unit");
    is_unit[c] = true;
  }
  return is_unit;
}

// Hands each parameter to one unit: remembers those already handed out, across children.
class ParameterOwners {
 public:
  bool owned(const Variable& p) const {
    return std::find(seen_.begin(), seen_.end(), p.impl()) != seen_.end();
  }
  void take(const Variable& p) { seen_.push_back(p.impl()); }
  size_t size() const { return seen_.size(); }

 private:
  std::vector<const VariableImpl*> seen_;
};

// All of child c's parameters. A parameter shared by two children would have to be in two
// units at once: refused.
NamedParameters child_parameters(const nn::Sequential& model, size_t c, ParameterOwners& owners) {
  NamedParameters out;
  for (auto& [name, p] : model[c]->named_parameters()) {
    if (owners.owned(p)) {
      TS_FAIL("FullyShardedDataParallel: parameter ", model.name_at(c), ".", name,
              " is shared with an earlier child; shared parameters must stay in one child");
    }
    owners.take(p);
    out.emplace_back(model.name_at(c) + "." + name, p);
  }
  return out;
}

// wrap_layers (FSDP's ModuleWrapPolicy over the layer types): every module inside child c with
// parameters of its own is a unit; the child's direct parameters make a unit at the child. A
// parameter seen before (shared between layers) stays with the first.
void wrap_layers_of_child(nn::Sequential& model, size_t c, ParameterOwners& owners,
                          std::vector<UnitSpec>& units) {
  const auto modules = model[c]->named_modules();
  for (size_t k = 0; k < modules.size(); ++k) {
    const auto& [path, module] = modules[k];
    UnitSpec unit;
    for (auto& [name, p] : module->named_parameters(/*recurse=*/false)) {
      if (owners.owned(p)) continue;
      owners.take(p);
      unit.params.emplace_back(model.name_at(c) + "." + (path.empty() ? "" : path + ".") + name, p);
    }
    if (unit.params.empty()) continue;
    if (k == 0) {
      unit.children = {c};
    } else {
      unit.module = module;
    }
    unit.first = unit.last = {c, k};
    units.push_back(std::move(unit));
  }
}

}  // namespace

std::vector<UnitSpec> wrap_units(nn::Sequential& model, const FullyShardedOptions& options) {
  const std::vector<bool> is_unit = children_wrapped(model, options);
  ParameterOwners owners;
  std::vector<UnitSpec> units;
  UnitSpec root;
  root.is_root = true;
  for (size_t c = 0; c < model.size(); ++c) {
    if (options.wrap_layers()) {
      wrap_layers_of_child(model, c, owners, units);
      continue;
    }
    NamedParameters params = child_parameters(model, c, owners);
    if (params.empty()) continue;
    if (is_unit[c]) {
      UnitSpec unit;
      unit.params = std::move(params);
      unit.children = {c};
      unit.first = unit.last = {c, 0};
      units.push_back(std::move(unit));
    } else {
      root.children.push_back(c);
      for (auto& p : params) root.params.push_back(std::move(p));
    }
  }
  TS_CHECK(model.parameters().size() == owners.size(), "FullyShardedDataParallel: the model has ",
           model.parameters().size(), " parameters but its children hold ", owners.size(),
           "; parameters registered on the Sequential itself are not supported");
  if (!root.params.empty()) {
    root.first = {root.children.front(), 0};
    root.last = {root.children.back(), 0};
    units.push_back(std::move(root));
  }
  return units;
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
