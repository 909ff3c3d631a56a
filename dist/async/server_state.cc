#include "dist/async/server_state.h"

#include <algorithm>
#include <map>
#include <string>

#include "autograd/grad_mode.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

// A shard's one parameter: its per-element state NAMEs, in the order its optimizer gave them.
std::vector<std::string> element_state_names(const StateDict& state) {
  std::vector<std::string> names;
  for (const auto& [name, t] : state) {
    if (name != "step") names.push_back(name);
  }
  return names;
}

// Per parameter of `params` (flat order), its number in the unsplit state: its place in
// `numbering`, or its own place when `numbering` is empty.
std::vector<int64_t> state_numbers(const std::vector<Variable>& params,
                                   const std::vector<Variable>& numbering, const char* who) {
  std::vector<int64_t> number(params.size());
  if (numbering.empty()) {
    for (size_t i = 0; i < params.size(); ++i) number[i] = static_cast<int64_t>(i);
    return number;
  }
  TS_CHECK(numbering.size() == params.size(), who, ": the numbering lists ", numbering.size(),
           " parameters, the flat vector holds ", params.size());
  std::map<const VariableImpl*, int64_t> place;
  for (size_t k = 0; k < numbering.size(); ++k) {
    TS_CHECK(place.emplace(numbering[k].impl(), static_cast<int64_t>(k)).second, who,
             ": parameter '", numbering[k].name(), "' is numbered twice (at ", place.at(numbering[k].impl()),
             " and ", k, ")");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = place.find(params[i].impl());
    TS_CHECK(it != place.end(), who, ": parameter ", i, " ('", params[i].name(),
             "') of the flat vector is not in the numbering");
    number[i] = it->second;
  }
  return number;
}

}  // namespace

StateDict unsplit_optimizer_state(const std::vector<StateDict>& servers,
                                  const ParameterServerLayout& layout,
                                  const std::vector<Variable>& params,
                                  const std::vector<Variable>& numbering) {
  NoGradGuard no_grad;
  const std::vector<int64_t> number = state_numbers(params, numbering, "unsplit_optimizer_state");
  TS_CHECK(static_cast<int>(servers.size()) == layout.servers(), "unsplit_optimizer_state: ",
           servers.size(), " servers' states for ", layout.servers(), " servers");
  const std::string zero = optim::state_key_prefix(0);
  const StateDict first = servers[0].with_prefix_removed(zero);
  StateDict full;
  if (first.empty()) return full;  // no push applied yet
  const Tensor& step = first.at("step");
  const std::vector<std::string> names = element_state_names(first);
  // Per NAME, the servers' shards end to end: the flat vector of the unsplit parameters.
  std::vector<Tensor> flat;
  for (const std::string& name : names) {
    std::vector<Tensor> parts;
    for (int s = 0; s < layout.servers(); ++s) {
      const StateDict mine = servers[s].with_prefix_removed(zero);
      const Tensor* st = mine.find("step");
      TS_CHECK(st != nullptr && st->item() == step.item(), "unsplit_optimizer_state: server ", s,
               " has step count ", st ? static_cast<int64_t>(st->item()) : -1, ", server 0 ",
               static_cast<int64_t>(step.item()),
               " (every push is applied on every server)");
      const Tensor& t = mine.at(name);
      TS_CHECK(t.numel() == layout.shard_numel(s), "unsplit_optimizer_state: server ", s, "'s '",
               zero, name, "' has ", t.numel(), " elements, its shard ", layout.shard_numel(s));
      parts.push_back(t.reshape({-1}));
    }
    flat.push_back(cat(parts, 0));
  }
  int64_t at = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Variable& p = params[i];
    const int64_t index = number[i];
    full.set(optim::state_key(index, "step"), step.clone());
    for (size_t k = 0; k < names.size(); ++k) {
      full.set(optim::state_key(index, names[k]),
               flat[k].narrow(0, at, p.numel()).view(p.shape()).clone());
    }
    at += p.numel();
  }
  TS_CHECK(at == layout.numel(), "unsplit_optimizer_state: ", at, " parameter elements, but the "
           "servers hold ", layout.numel());
  return full;
}

StateDict shard_optimizer_state(const StateDict& full, const ParameterServerLayout& layout,
                                int server, const std::vector<Variable>& params,
                                const std::vector<Variable>& numbering) {
  NoGradGuard no_grad;
  const char* who = "shard_optimizer_state";
  const std::vector<int64_t> number = state_numbers(params, numbering, who);
  StateDict out;
  bool any_state = false;
  for (const auto& [key, t] : full) {
    if (!optim::has_state_prefix(key)) {
      out.set(key, t);  // "param_groups.G.NAME"
      continue;
    }
    TS_CHECK(optim::parse_state_key(key, params.size()).has_value(), who, ": key '", key,
             "' is not of the form 'state.I.NAME' with I a parameter index in [0, ",
             params.size(), ")");
    any_state = true;
  }
  if (!any_state) return out;  // the optimizer starts fresh
  const StateDict first = full.with_prefix_removed(optim::state_key_prefix(0));
  const Tensor* step = first.find("step");
  TS_CHECK(step != nullptr, who, ": '", optim::state_key(0, "step"), "' is missing (a server's "
           "shard steps all its parameters as one, so each needs the same step count)");
  const std::vector<std::string> names = element_state_names(first);
  for (size_t i = 0; i < params.size(); ++i) {
    const StateDict own = full.with_prefix_removed(optim::state_key_prefix(number[i]));
    const Tensor* s = own.find("step");
    TS_CHECK(s != nullptr && s->item() == step->item(), who, ": parameter ", number[i], " (",
             params[i].name(), ") has step count ", s ? std::to_string(static_cast<int64_t>(s->item())) : "none",
             ", parameter 0 ", static_cast<int64_t>(step->item()), ": a server's shard steps all its parameters as "
             "one, so they must share it");
    TS_CHECK(element_state_names(own) == names, who, ": parameter ", number[i], " (", params[i].name(),
             ") has optimizer state ", element_state_names(own), ", parameter 0 ", names);
    for (const std::string& name : names) {
      TS_CHECK(own.at(name).numel() == params[i].numel(), who, ": '",
               optim::state_key(number[i], name), "' has shape ",
               own.at(name).shape(), " but parameter ", number[i], " (", params[i].name(), ") has ",
               params[i].shape());
    }
  }
  const std::string zero = optim::state_key_prefix(0);
  out.set(zero + "step", step->clone());
  const int64_t begin = layout.shard_offset(server), count = layout.shard_numel(server);
  for (const std::string& name : names) {
    // This server's elements: the parts of the parameters that overlap [begin, begin + count).
    const Tensor& like = first.at(name);
    Tensor part = empty({count}, TensorOptions(like.dtype()).device(like.device()));
    int64_t at = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t n = params[i].numel();
      const int64_t lo = std::max(at, begin), hi = std::min(at + n, begin + count);
      if (lo < hi) {
        const Tensor t = full.at(optim::state_key(number[i], name)).reshape({-1});
        part.narrow(0, lo - begin, hi - lo).copy_(t.narrow(0, lo - at, hi - lo));
      }
      at += n;
    }
    TS_CHECK(at == layout.numel(), who, ": ", at, " parameter elements, but the servers hold ",
             layout.numel());
    out.set(zero + name, part);
  }
  return out;
}

}  // namespace dist
}  // namespace tessera
