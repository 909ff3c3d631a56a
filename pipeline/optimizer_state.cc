#include "pipeline/optimizer_state.h"

#include <map>
#include <optional>
#include <string>

#include "dist/state_dict_gather.h"
#include "optim/state_keys.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {

namespace {

// "state.12.exp_avg" -> index 12, name "exp_avg"; nullopt for any other key.
std::optional<optim::StateKey> parameter_state_key(const std::string& key) {
  if (!optim::has_state_prefix(key)) return std::nullopt;
  std::optional<optim::StateKey> parsed = optim::parse_state_key(key);
  TS_CHECK(parsed.has_value(), "pipeline optimizer state: malformed key '", key,
           "' (expected state.INDEX.NAME)");
  return parsed;
}

// "param_groups.1.lr" -> {1, "lr"}; nullopt for any other key.
std::optional<optim::StateKey> group_key(const std::string& key) {
  const std::string prefix = "param_groups.";
  if (key.rfind(prefix, 0) != 0) return std::nullopt;
  const size_t dot = key.find('.', prefix.size());
  const std::string g = key.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size());
  TS_CHECK(dot != std::string::npos && !g.empty() && g.size() <= 9 &&
               g.find_first_not_of("0123456789") == std::string::npos,
           "pipeline optimizer state: malformed key '", key, "' (expected param_groups.G.NAME)");
  return optim::StateKey{std::stoll(g), key.substr(dot + 1)};
}

std::string group_key_of(int64_t group, const std::string& name) {
  return "param_groups." + std::to_string(group) + "." + name;
}

// This rank's optimizer numbering against the whole model's: for each of its parameters and
// groups, the whole model's number.
struct Renumbering {
  std::vector<int64_t> parameter;  // -1: a copy of a tied parameter another stage owns (skipped)
  std::vector<int64_t> group;
};

Renumbering renumbering(const Pipe& pipe, const ParameterGroups& groups,
                        const ParameterGroups& model_groups, bool skip_copies) {
  const ParameterGroups whole = model_groups.empty() ? ParameterGroups{pipe.model()->parameters()} : model_groups;
  const ParameterGroups mine = groups.empty() ? ParameterGroups{pipe.parameters()} : groups;
  std::map<const VariableImpl*, std::pair<int64_t, int64_t>> where;  // -> (index, group)
  int64_t index = 0;
  for (size_t g = 0; g < whole.size(); ++g) {
    for (const Variable& p : whole[g]) where[p.impl()] = {index++, static_cast<int64_t>(g)};
  }
  std::map<const VariableImpl*, bool> copy;
  for (const TiedParameter& t : pipe.tied_parameters()) copy[t.variable.impl()] = t.owner != pipe.stage();
  Renumbering out;
  for (size_t g = 0; g < mine.size(); ++g) {
    int64_t model_group = -1;
    for (const Variable& p : mine[g]) {
      const auto it = where.find(p.impl());
      TS_CHECK(it != where.end(), "pipeline optimizer state: parameter '", p.name(), "' of stage ",
               pipe.stage(), "'s optimizer is not among the whole model's ", index, " parameters");
      TS_CHECK(model_group < 0 || model_group == it->second.second, "pipeline optimizer state: "
               "stage ", pipe.stage(), "'s parameter group ", g, " holds parameters of the whole "
               "model's groups ", model_group, " and ", it->second.second);
      model_group = it->second.second;
      out.parameter.push_back(skip_copies && copy[p.impl()] ? -1 : it->second.first);
    }
    out.group.push_back(model_group);
  }
  return out;
}

}  // namespace

ParameterGroups parameter_groups(const optim::Optimizer& optimizer) {
  ParameterGroups out;
  for (const optim::ParamGroup& g : optimizer.param_groups()) out.push_back(g.params);
  return out;
}

StateDict gather_optimizer_state(const Pipe& pipe, const StateDict& local,
                                 const ParameterGroups& groups, const ParameterGroups& model_groups) {
  const Renumbering to = renumbering(pipe, groups, model_groups, /*skip_copies=*/true);
  StateDict renumbered;
  for (const auto& [key, tensor] : local) {
    if (const std::optional<optim::StateKey> k = parameter_state_key(key)) {
      TS_CHECK(k->index < static_cast<int64_t>(to.parameter.size()), "gather_optimizer_state: '",
               key, "' names parameter ", k->index, " but stage ", pipe.stage(), " has ",
               to.parameter.size(), " parameters (is this its optimizer's state?)");
      if (to.parameter[k->index] < 0) continue;  // a tied copy: its owner's state is the same
      renumbered.set(optim::state_key(to.parameter[k->index], k->name), tensor);
    } else if (const std::optional<optim::StateKey> g = group_key(key)) {
      TS_CHECK(g->index < static_cast<int64_t>(to.group.size()), "gather_optimizer_state: '", key,
               "' names group ", g->index, " but stage ", pipe.stage(), "'s optimizer has ",
               to.group.size());
      renumbered.set(group_key_of(to.group[g->index], g->name), tensor);
    } else {
      renumbered.set(key, tensor);
    }
  }
  StateDict full;
  for (const StateDict& stage : dist::all_gather_state_dicts(renumbered, *pipe.pipeline_group())) {
    for (const auto& [key, tensor] : stage) {
      // A group's options come from every stage holding it alike; the first stage's are kept.
      if (!full.contains(key)) full.set(key, tensor);
    }
  }
  return full;
}

StateDict slice_optimizer_state(const Pipe& pipe, const StateDict& full,
                                const ParameterGroups& groups, const ParameterGroups& model_groups) {
  // Copies of tied parameters take their owner's state: every parameter of this rank, here.
  const Renumbering from = renumbering(pipe, groups, model_groups, /*skip_copies=*/false);
  std::map<int64_t, int64_t> local_parameter, local_group;
  for (size_t i = 0; i < from.parameter.size(); ++i) local_parameter[from.parameter[i]] = i;
  for (size_t g = 0; g < from.group.size(); ++g) local_group[from.group[g]] = g;
  StateDict mine;
  for (const auto& [key, tensor] : full) {
    if (const std::optional<optim::StateKey> k = parameter_state_key(key)) {
      const auto it = local_parameter.find(k->index);
      if (it != local_parameter.end()) mine.set(optim::state_key(it->second, k->name), tensor);
    } else if (const std::optional<optim::StateKey> g = group_key(key)) {
      const auto it = local_group.find(g->index);
      if (it != local_group.end()) mine.set(group_key_of(it->second, g->name), tensor);
    } else {
      mine.set(key, tensor);
    }
  }
  return mine;
}

}  // namespace pipeline
}  // namespace tessera
