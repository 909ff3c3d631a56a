#include "dist/zero/wrap_policy.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

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

// What the policy hands parameters to: a child (units() or min_num_params), or under wrap_layers
// one module of a child's tree (k: its place in the child's depth-first walk, 0 the child).
struct Holder {
  size_t child, k;
  nn::Module* module;
};

std::vector<Holder> holders_of(nn::Sequential& model, bool layers) {
  std::vector<Holder> holders;
  for (size_t c = 0; c < model.size(); ++c) {
    if (!layers) {
      holders.push_back({c, 0, model[c].get()});
      continue;
    }
    const auto modules = model[c]->named_modules();
    for (size_t k = 0; k < modules.size(); ++k) holders.push_back({c, k, modules[k].second});
  }
  return holders;
}

// Who holds and who uses each parameter. A holder owns the parameters registered in it (a
// child: in its whole tree; a layer: its own) and uses those and the ones it ties
// (nn::Module::register_tied_parameter). A parameter used by two holders (GPT-2's token
// embedding, read by the embedding and by the tied output projection; a module registered in
// two children) cannot live in either one's unit: that unit is freed after its own forward
// while the other still needs the values. As FSDP does, it goes to the unit enclosing all of
// its users, which for units that are children of one Sequential is the root.
class ParameterUsers {
 public:
  ParameterUsers(const std::vector<Holder>& holders, bool layers) : layers_(layers) {
    for (size_t h = 0; h < holders.size(); ++h) {
      const nn::Module& m = *holders[h].module;
      for (const auto& [name, p] : m.named_parameters(/*recurse=*/!layers)) {
        owner_.emplace(p.impl(), h);  // the first holder keeps it
        use(p, holders[h]);
      }
      for (const auto& [name, p] : m.named_tied_parameters(/*recurse=*/!layers)) {
        ties_.emplace_back(holders[h].child, name, p);
        use(p, holders[h]);
      }
    }
  }
  // The holder that owns p (its first, for a module registered twice).
  size_t owner(const Variable& p) const { return owner_.at(p.impl()); }
  bool owned(const Variable& p) const { return owner_.count(p.impl()) > 0; }
  // Used by more than one holder: two children, or under wrap_layers two modules (a module
  // registered twice is one user there: its own forward hooks gather it for every call).
  bool shared(const Variable& p) const { return users_.at(p.impl()).size() > 1; }
  // The children whose trees use p.
  std::vector<size_t> user_children(const Variable& p) const {
    std::vector<size_t> out;
    for (const auto& [module, child] : users_.at(p.impl())) out.push_back(child);
    return out;
  }
  // Every tie must point at a parameter of the model.
  void check_ties(const nn::Sequential& model) const {
    for (const auto& [child, name, p] : ties_) {
      TS_CHECK(owned(p), "FullyShardedDataParallel: ", model.name_at(child), ".", name,
               " is tied to a parameter that no module of the model registers");
    }
  }

 private:
  void use(const Variable& p, const Holder& h) {
    std::vector<std::pair<const nn::Module*, size_t>>& users = users_[p.impl()];
    const bool known = std::any_of(users.begin(), users.end(), [&](const auto& u) {
      return layers_ ? u.first == h.module : u.second == h.child;
    });
    if (!known) users.emplace_back(h.module, h.child);
  }

  bool layers_;
  std::map<const VariableImpl*, size_t> owner_;
  std::map<const VariableImpl*, std::vector<std::pair<const nn::Module*, size_t>>> users_;
  std::vector<std::tuple<size_t, std::string, Variable>> ties_;
};

}  // namespace

std::vector<UnitSpec> wrap_units(nn::Sequential& model, const FullyShardedOptions& options) {
  const bool layers = options.wrap_layers();
  const std::vector<bool> is_unit = layers ? std::vector<bool>(model.size(), false)
                                           : children_wrapped(model, options);
  const std::vector<Holder> holders = holders_of(model, layers);
  const ParameterUsers users(holders, layers);
  users.check_ties(model);

  // Each parameter, in the model's registration order and under its name there, goes to its
  // holder's unit, or to the root: when shared, or held by a child that is not a unit.
  std::vector<UnitSpec> units;
  std::vector<int> unit_of_holder(holders.size(), -1);
  UnitSpec root;
  root.is_root = true;
  std::vector<size_t> root_children;
  for (const auto& [name, p] : model.named_parameters()) {
    TS_CHECK(users.owned(p), "FullyShardedDataParallel: parameter ", name, " is registered on "
             "the Sequential itself; parameters registered on the Sequential are not supported");
    const size_t h = users.owner(p);
    const Holder& holder = holders[h];
    if (users.shared(p) || (!layers && !is_unit[holder.child])) {
      root.params.emplace_back(name, p);
      for (size_t c : users.user_children(p)) root_children.push_back(c);
      continue;
    }
    if (unit_of_holder[h] < 0) {
      unit_of_holder[h] = static_cast<int>(units.size());
      UnitSpec unit;
      if (holder.k == 0) {
        unit.children = {holder.child};
      } else {
        unit.module = holder.module;
      }
      unit.first = unit.last = {holder.child, holder.k};
      units.push_back(std::move(unit));
    }
    units[unit_of_holder[h]].params.emplace_back(name, p);
  }
  // A child listed as a unit whose parameters are all shared has nothing left to shard.
  for (size_t c : options.units()) {
    TS_CHECK(std::any_of(units.begin(), units.end(),
                         [&](const UnitSpec& u) { return u.children == std::vector<size_t>{c}; }),
             "FullyShardedDataParallel: child ", c, " (", model[c]->type_name(), ") cannot be a "
             "unit: every parameter it holds is shared with another child, so it belongs to the "
             "root unit, which encloses both");
  }
  if (!root.params.empty()) {
    std::sort(root_children.begin(), root_children.end());
    root_children.erase(std::unique(root_children.begin(), root_children.end()),
                        root_children.end());
    root.children = std::move(root_children);
    root.first = {root.children.front(), 0};
    root.last = {root.children.back(), 0};
    units.push_back(std::move(root));
  }
  return units;
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
