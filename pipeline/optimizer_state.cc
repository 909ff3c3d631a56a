#include "pipeline/optimizer_state.h"

#include <map>
#include <string>

#include "dist/state_dict_gather.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {

namespace {

// "state.12.exp_avg" -> index 12, rest "exp_avg"; false for any other key (param_groups...).
bool parse_state_key(const std::string& key, int64_t& index, std::string& rest) {
  static const std::string prefix = "state.";
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = key.find('.', prefix.size());
  TS_CHECK(dot != std::string::npos && dot > prefix.size(),
           "pipeline optimizer state: malformed key '", key, "' (expected state.INDEX.NAME)");
  const std::string digits = key.substr(prefix.size(), dot - prefix.size());
  TS_CHECK(digits.find_first_not_of("0123456789") == std::string::npos,
           "pipeline optimizer state: malformed key '", key, "' (expected state.INDEX.NAME)");
  index = std::stoll(digits);
  rest = key.substr(dot + 1);
  return true;
}

std::string state_key(int64_t index, const std::string& rest) {
  return "state." + std::to_string(index) + "." + rest;
}

}  // namespace

StateDict gather_optimizer_state(const Pipe& pipe, const StateDict& local) {
  const std::vector<int64_t> global = pipe.parameter_indices();
  StateDict renumbered;
  for (const auto& [key, tensor] : local) {
    int64_t i;
    std::string rest;
    if (!parse_state_key(key, i, rest)) {
      renumbered.set(key, tensor);
      continue;
    }
    TS_CHECK(i >= 0 && i < static_cast<int64_t>(global.size()), "gather_optimizer_state: '", key,
             "' names parameter ", i, " but stage ", pipe.stage(), " has ",
             global.size(), " parameters (is this its optimizer's state?)");
    renumbered.set(state_key(global[i], rest), tensor);
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
    int64_t g;
    std::string rest;
    if (!parse_state_key(key, g, rest)) {
      mine.set(key, tensor);
      continue;
    }
    const auto it = local_of.find(g);
    if (it != local_of.end()) mine.set(state_key(it->second, rest), tensor);
  }
  return mine;
}

}  // namespace pipeline
}  // namespace tessera
