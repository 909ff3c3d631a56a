// ZeroRedundancyOptimizer's state dict in the consolidated format: per parameter, as the inner
// optimizer writes it unsharded ("state.I.NAME", and "state.I.master" for the f32 masters of
// f16/bf16 parameters), gathered from every rank's shard on save (a collective) and cut to this
// rank's shard on load, so a ZeRO checkpoint loads into a plain optimizer and back, at any world
// size (zero_optimizer.h). I numbers the parameters as the plain optimizer over the same groups
// does: in the groups' order (state_index_), which is not the flat vector's when a model's
// groups interleave (GPT-2's decay group holds every block's weights, the other their biases).
#include "dist/zero/zero_optimizer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

StateDict ZeroRedundancyOptimizer::state_dict() const {
  const StateDict local = inner_->state_dict();
  StateDict full;
  save_param_groups(full);
  // Ranks that have not stepped yet have no state entries; all ranks step together, so the
  // presence of "state.0.step" is the same everywhere. The inner optimizer has one parameter,
  // the flat shard: parameter 0.
  const Tensor* step = local.find(optim::state_key(0, "step"));
  if (step == nullptr) return full;
  std::vector<std::string> names;
  for (const auto& [name, t] : local.with_prefix_removed(optim::state_key_prefix(0))) {
    if (name != "step") names.push_back(name);
  }
  const std::vector<int64_t> counts = zero::sizes(shards_);
  std::vector<std::pair<std::string, Tensor>> gathered;
  for (const std::string& name : names) {
    Tensor flat = empty({layout_.total}, flat_options());
    group_->all_gather(local.at(optim::state_key(0, name)).to(flat_dtype_).contiguous(), flat, counts)->wait();
    gathered.emplace_back(name, flat);
  }
  Tensor master;
  const bool has_master = std::any_of(params_.begin(), params_.end(),
                                      [](const Variable& p) { return is_half(p.dtype()); });
  if (has_master) {
    master = empty({layout_.total}, TensorOptions(kF32).device(device_));
    // Offloaded, the shard is not in memory between steps: its master values are.
    group_->all_gather(release_shard_ ? master_shard() : shard_.data(), master, counts)->wait();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = optim::state_key_prefix(state_index_[i]);
    const zero::Range& r = layout_.ranges[i];
    full.set(prefix + "step", step->clone());
    for (const auto& [name, flat] : gathered) {
      full.set(prefix + name, flat.narrow(0, r.begin, r.size()).view(params_[i].shape()).clone());
    }
    if (is_half(params_[i].dtype())) {
      full.set(prefix + "master",
               master.narrow(0, r.begin, r.size()).view(params_[i].shape()).clone());
    }
  }
  return full;
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& full) {
  load_param_groups(full);
  StateDict local;
  for (const auto& [name, t] : full) {
    if (name.rfind("param_groups.", 0) == 0) local.set(name, t);
  }
  const std::string step_key = optim::state_key(0, "step");
  if (full.contains(step_key)) {
    local.set(step_key, full.at(step_key));
    std::vector<std::string> names;
    for (const auto& [name, t] : full.with_prefix_removed(optim::state_key_prefix(0))) {
      if (name != "step" && name != "master") names.push_back(name);
    }
    for (const std::string& name : names) {
      Tensor flat = empty({layout_.total}, flat_options());
      for (size_t i = 0; i < params_.size(); ++i) {
        const std::string key = optim::state_key(state_index_[i], name);
        TS_CHECK(full.contains(key), "ZeroRedundancyOptimizer::load_state_dict: missing '", key, "'");
        const Tensor& t = full.at(key);
        TS_CHECK(t.numel() == params_[i].numel(), "ZeroRedundancyOptimizer::load_state_dict: '",
                 key, "' has shape ", t.shape(), " but parameter ", state_index_[i], " ('",
                 params_[i].name(), "') has ", params_[i].shape());
        const zero::Range& r = layout_.ranges[i];
        flat.narrow(0, r.begin, r.size()).copy_(t.reshape({-1}));
      }
      local.set(optim::state_key(0, name), flat.narrow(0, shard_offset(), shard_numel()).clone());
    }
    // Masters are kept for f16/bf16 parameters only, wherever they sit (a model may start with
    // an f32 BatchNorm): look for any.
    bool has_master = false;
    for (size_t i = 0; i < params_.size() && !has_master; ++i) {
      has_master = full.contains(optim::state_key(state_index_[i], "master"));
    }
    if (has_master) {
      Tensor flat = empty({layout_.total}, TensorOptions(kF32).device(device_));
      for (size_t i = 0; i < params_.size(); ++i) {
        const std::string key = optim::state_key(state_index_[i], "master");
        const Tensor* t = full.find(key);
        TS_CHECK(t != nullptr || !is_half(params_[i].dtype()),
                 "ZeroRedundancyOptimizer::load_state_dict: '", key, "' is missing for ",
                 params_[i].dtype(), " parameter ", state_index_[i], " ('", params_[i].name(),
                 "') though other parameters have their masters");
        const Tensor source = t != nullptr ? *t : params_[i].data();
        const zero::Range& r = layout_.ranges[i];
        flat.narrow(0, r.begin, r.size()).copy_(source.reshape({-1}));
      }
      load_master_shard(flat.narrow(0, shard_offset(), shard_numel()));
    } else {
      shard_is_master_ = false;  // no masters saved: the next step refreshes them from the parameters
    }
  }
  inner_->load_state_dict(local);
}

}  // namespace dist
}  // namespace tessera
