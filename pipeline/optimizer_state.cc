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

// "state.12.exp_avg" -> index 12, name "exp_avg"; nullopt for any other key (param_groups...).
std::optional<optim::StateKey> parameter_state_key(const std::string& key) {
  if (!optim::has_state_prefix(key)) return std::nullopt;
  std::optional<optim::StateKey> parsed = optim::parse_state_key(key);
  TS_CHECK(parsed.has_value(), "pipeline optimizer state: malformed key '", key,
           "' (expected state.INDEX.NAME)");
  return parsed;
}

}  // namespace

StateDict gather_optimizer_state(const Pipe& pipe, const StateDict& local) {
  const std::vector<int64_t> global = pipe.parameter_indices();
  StateDict renumbered;
  for (const auto& [key, tensor] : local) {
    const std::optional<optim::StateKey> k = parameter_state_key(key);
    if (!k) {
      renumbered.set(key, tensor);
      continue;
    }
    TS_CHECK(k->index < static_cast<int64_t>(global.size()), "gather_optimizer_state: '", key,
             "' names parameter ", k->index, " but stage ", pipe.stage(), " has ",
             global.size(), " parameters (is this its optimizer's state?)");
    renumbered.set(optim::state_key(global[k->index], k->name), tensor);
  }
  StateDict full;
  for (const StateDict& stage : dist::all_gather_state_dicts(renumbered, *pipe.pipeline_group())) {
    for (const auto& [key, tensor] : stage) {
      // param_groups entries come from every stage alike; the first stage's are kept.
      if (!full.contains(key)) full.set(key, tensor);
    }
  }
  return full;
}

StateDict slice_optimizer_state(const Pipe& pipe, const StateDict& full) {
  std::map<int64_t, int64_t> local_of;
  const std::vector<int64_t> global = pipe.parameter_indices();
  for (size_t i = 0; i < global.size(); ++i) local_of[global[i]] = static_cast<int64_t>(i);
  StateDict mine;
  for (const auto& [key, tensor] : full) {
    const std::optional<optim::StateKey> k = parameter_state_key(key);
    if (!k) {
      mine.set(key, tensor);
      continue;
    }
    const auto it = local_of.find(k->index);
    if (it != local_of.end()) mine.set(optim::state_key(it->second, k->name), tensor);
  }
  return mine;
}

}  // namespace pipeline
}  // namespace tessera
