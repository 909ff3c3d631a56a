#include "dist/zero/fully_sharded_optimizer_state.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace zero {

namespace {

// Each parameter's index in the unsplit model's optimizer, by its name (state_order).
std::map<std::string, int64_t> parameter_indices(FullyShardedDataParallel& fsdp,
                                                 const optim::Optimizer& optimizer) {
  const std::vector<Variable> order = state_order(fsdp, optimizer);
  std::map<std::string, int64_t> index;
  for (const auto& [name, p] : fsdp.module().named_parameters()) {
    const auto at = std::find_if(order.begin(), order.end(),
                                 [&](const Variable& q) { return q.is_same(p); });
    TS_INTERNAL_ASSERT(at != order.end(), "parameter '", name, "' is not in the optimizer's order");
    index.emplace(name, static_cast<int64_t>(at - order.begin()));
  }
  return index;
}

// The "param_groups.G.NAME" entries (the options: learning rate, ...), which the units' optimizer
// and the unsplit model's share.
void copy_param_groups(const StateDict& from, StateDict& to) {
  for (const auto& [key, t] : from) {
    if (key.rfind("param_groups.", 0) == 0) to.set(key, t);
  }
}

}  // namespace

std::vector<Variable> state_order(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer) {
  if (dynamic_cast<const GroupedShardOptimizer*>(&optimizer) != nullptr) return optimizer.parameters();
  return fsdp.module().parameters();
}

void check_shard_optimizer(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer,
                           const char* who) {
  const std::vector<Variable> shards = fsdp.shard_parameters();
  // A grouped optimizer steps pieces of the shards; its shards are what it stands for.
  const auto* grouped = dynamic_cast<const GroupedShardOptimizer*>(&optimizer);
  std::vector<Variable> params = grouped != nullptr ? grouped->gradient_variables() : optimizer.parameters();
  bool same = params.size() == shards.size();
  for (size_t i = 0; same && i < params.size(); ++i) same = params[i].is_same(shards[i]);
  TS_CHECK(same, who, ": the optimizer's ", params.size(),
           " parameters are not fsdp.shard_parameters() (", shards.size(),
           " unit shards) in that order");
}

StateDict gather_optimizer_state(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer) {
  NoGradGuard no_grad;
  check_shard_optimizer(fsdp, optimizer, "gather_optimizer_state");
  const StateDict local = optimizer.state_dict();
  const std::map<std::string, int64_t> index = parameter_indices(fsdp, optimizer);
  StateDict full;
  copy_param_groups(local, full);
  for (size_t u = 0; u < fsdp.units().size(); ++u) {
    const FlatParameter& unit = *fsdp.units()[u];
    // Every rank steps every unit together: a unit has state on all ranks or on none.
    const Tensor* step = local.find(optim::state_key(static_cast<int64_t>(u), "step"));
    if (step == nullptr) continue;
    std::vector<std::pair<std::string, Tensor>> flat;  // per state name: the padded vector
    for (const auto& [name, t] : local.with_prefix_removed(optim::state_key_prefix(u))) {
      if (name == "step") continue;
      Tensor whole = empty({unit.padded_numel()}, TensorOptions(t.dtype()).device(t.device()));
      fsdp.group().all_gather(t.contiguous(), whole)->wait();
      flat.emplace_back(name, whole);
    }
    if (is_half(unit.dtype())) {
      // The shard is the f32 master of f16/bf16 parameters: an unsplit optimizer's "master".
      const Tensor shard = unit.shard_values();
      Tensor whole = empty({unit.padded_numel()}, TensorOptions(shard.dtype()).device(shard.device()));
      fsdp.group().all_gather(shard, whole)->wait();
      flat.emplace_back("master", whole);
    }
    for (size_t j = 0; j < unit.params().size(); ++j) {
      const auto it = index.find(unit.params()[j].first);
      TS_INTERNAL_ASSERT(it != index.end(), "unit parameter '", unit.params()[j].first,
                         "' is not among the model's parameters");
      const Range& r = unit.layout().ranges[j];
      full.set(optim::state_key(it->second, "step"), step->clone());
      for (const auto& [name, whole] : flat) {
        full.set(optim::state_key(it->second, name),
                 whole.narrow(0, r.begin, r.size()).view(unit.shapes()[j]).clone());
      }
    }
  }
  return full;
}

void load_optimizer_state(const StateDict& full, FullyShardedDataParallel& fsdp,
                          optim::Optimizer& optimizer) {
  NoGradGuard no_grad;
  const char* who = "load_optimizer_state";
  check_shard_optimizer(fsdp, optimizer, who);
  const std::map<std::string, int64_t> index = parameter_indices(fsdp, optimizer);
  const int rank = fsdp.group().rank();
  StateDict local;
  copy_param_groups(full, local);
  for (size_t u = 0; u < fsdp.units().size(); ++u) {
    const FlatParameter& unit = *fsdp.units()[u];
    const Range mine{rank * unit.shard_numel(), (rank + 1) * unit.shard_numel()};
    std::vector<int64_t> indices;
    for (const auto& [name, p] : unit.params()) indices.push_back(index.at(name));
    // The unit's state names are its first parameter's; every other parameter must have the same.
    const std::string first = optim::state_key_prefix(indices[0]);
    const Tensor* step = full.find(first + "step");
    std::vector<std::string> names;
    for (const auto& [name, t] : full.with_prefix_removed(first)) {
      if (name != "step") names.push_back(name);
    }
    for (size_t j = 0; j < indices.size(); ++j) {
      const Tensor* s = full.find(optim::state_key(indices[j], "step"));
      TS_CHECK((s == nullptr) == (step == nullptr) &&
                   (s == nullptr || s->item() == step->item()),
               who, ": parameters '", unit.params()[0].first, "' and '", unit.params()[j].first,
               "' share ZeRO-3 unit '", unit.name(), "' but not their step count in the "
               "checkpoint's optimizer state");
    }
    if (step == nullptr) {
      TS_CHECK(names.empty(), who, ": '", first, names[0], "' is present but '", first,
               "step' is not");
      continue;  // this unit has not stepped
    }
    local.set(optim::state_key(static_cast<int64_t>(u), "step"), *step);
    const Tensor shard = unit.shard_values();
    for (const std::string& name : names) {
      // This rank's S elements: the parts of the unit's parameters inside them, zero padding.
      Tensor part = name == "master"
                        ? shard.clone()  // parameters without a master keep their values
                        : zeros({unit.shard_numel()},
                                TensorOptions(shard.dtype()).device(shard.device()));
      for (size_t j = 0; j < indices.size(); ++j) {
        const std::string key = optim::state_key(indices[j], name);
        const Tensor* t = full.find(key);
        TS_CHECK(t != nullptr, who, ": '", key, "' (parameter '", unit.params()[j].first,
                 "') is missing though '", first, name, "' is present");
        const Range& r = unit.layout().ranges[j];
        TS_CHECK(t->numel() == r.size(), who, ": '", key, "' has shape ", t->shape(),
                 " but parameter '", unit.params()[j].first, "' has ", unit.shapes()[j]);
        const Range both = intersect(r, mine);
        if (both.empty()) continue;
        part.narrow(0, both.begin - mine.begin, both.size())
            .copy_(t->reshape({-1}).narrow(0, both.begin - r.begin, both.size()));
      }
      // The master is the shard itself (the values the optimizer steps).
      if (name == "master") {
        Tensor(shard).copy_(part);
      } else {
        local.set(optim::state_key(static_cast<int64_t>(u), name), part);
      }
    }
  }
  optimizer.load_state_dict(local);
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
