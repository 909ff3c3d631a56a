#include "dist/zero/wrap_policy.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "dist/zero/auto_wrap_policy.h"
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

namespace {

// The policy's units, bottom-up as FSDP's _recursive_wrap: a module's children are decided
// first, then the module, given the parameters of its tree they left unwrapped. A module met
// twice (registered in two places) is counted and decided once. Returns the unwrapped count.
int64_t choose_units(const nn::Module& m, bool is_root, const WrapPolicy& policy,
                     std::set<const nn::Module*>& seen, std::set<const nn::Module*>& units) {
  if (!seen.insert(&m).second) return 0;
  int64_t unwrapped = 0;
  for (const auto& [name, p] : m.named_parameters(/*recurse=*/false)) unwrapped += p.numel();
  for (const auto& [name, child] : m.named_children()) {
    unwrapped += choose_units(*child, false, policy, seen, units);
  }
  if (is_root || !policy(m, unwrapped)) return unwrapped;
  units.insert(&m);
  return 0;
}

// Each module's innermost enclosing unit (itself if a unit; -1: the root), for every place the
// module sits in the tree.
void enclosing_units(const nn::Module& m, int unit, const std::map<const nn::Module*, int>& index,
                     std::map<const nn::Module*, std::set<int>>& out) {
  const auto it = index.find(&m);
  if (it != index.end()) unit = it->second;
  if (!out[&m].insert(unit).second) return;  // this module in this unit: walked already
  for (const auto& [name, child] : m.named_children()) enclosing_units(*child, unit, index, out);
}

}  // namespace

std::vector<UnitSpec> wrap_module_units(nn::Module& model, const FullyShardedOptions& options) {
  TS_CHECK(options.units().empty(), "FullyShardedDataParallel: units() lists ",
           options.units().size(), " children of a Sequential, and this model is a ",
           model.type_name(), " (or was given an auto_wrap_policy): choose its units with "
           "auto_wrap_policy (module_wrap_policy<Block>(), size_based_wrap_policy(n))");
  TS_CHECK(!(options.auto_wrap_policy() && options.wrap_layers()), "FullyShardedDataParallel: "
           "auto_wrap_policy and wrap_layers(true) both choose the units; choose one");
  const WrapPolicy policy = options.auto_wrap_policy()    ? options.auto_wrap_policy()
                            : options.wrap_layers()       ? layer_wrap_policy()
                                                          : size_based_wrap_policy(options.min_num_params());
  std::set<const nn::Module*> seen, chosen;
  choose_units(model, /*is_root=*/true, policy, seen, chosen);

  // The units in depth-first order (a module registered twice, once), and where each module
  // sits.
  const std::vector<std::pair<std::string, nn::Module*>> modules = model.named_modules();
  std::map<const nn::Module*, int> index;
  std::vector<UnitSpec> units;
  for (size_t k = 0; k < modules.size(); ++k) {
    if (chosen.count(modules[k].second) == 0 || index.count(modules[k].second) > 0) continue;
    index[modules[k].second] = static_cast<int>(units.size());
    UnitSpec unit;
    unit.module = modules[k].second;
    unit.first = unit.last = {0, k};
    units.push_back(std::move(unit));
  }
  std::map<const nn::Module*, std::set<int>> where;
  enclosing_units(model, -1, index, where);

  // The units using each parameter: those enclosing the modules that register or tie it.
  const std::vector<std::pair<std::string, Variable>> params = model.named_parameters();
  std::map<const VariableImpl*, std::set<int>> users;
  for (const auto& [name, p] : params) users[p.impl()];
  for (const auto& [path, m] : modules) {
    for (const auto& [name, p] : m->named_parameters(/*recurse=*/false)) {
      users[p.impl()].insert(where[m].begin(), where[m].end());
    }
    for (const auto& [name, p] : m->named_tied_parameters(/*recurse=*/false)) {
      const auto it = users.find(p.impl());
      TS_CHECK(it != users.end(), "FullyShardedDataParallel: ", path.empty() ? "" : path + ".",
               name, " is tied to a parameter that no module of the model registers");
      it->second.insert(where[m].begin(), where[m].end());
    }
  }
  // Each parameter, in the model's registration order, to the one unit using it, or the root.
  UnitSpec root;
  root.is_root = true;
  root.first = {0, 0};
  root.last = {1, 0};  // its pre-backward hook is on the model's output: first in backward
  for (const auto& [name, p] : params) {
    const std::set<int>& u = users.at(p.impl());
    if (u.size() == 1 && *u.begin() >= 0) {
      units[*u.begin()].params.emplace_back(name, p);
    } else {
      root.params.emplace_back(name, p);
    }
  }
  // A unit all of whose parameters went to the root (shared with another unit) is none.
  units.erase(std::remove_if(units.begin(), units.end(), [](const UnitSpec& u) { return u.params.empty(); }),
              units.end());
  if (!root.params.empty()) units.push_back(std::move(root));
  return units;
}

}  // namespace zero

}  // namespace dist
}  // namespace tessera
