// A full checkpoint (dist/checkpoint.h) opened as if it were a sharded one written by one rank,
// so that load_sharded_checkpoint reads either kind through one path.
#include "dist/zero/sharded_checkpoint_parts.h"

#include "optim/state_keys.h"

namespace tessera {
namespace dist {
namespace zero {
namespace checkpoint_parts {

std::unique_ptr<Source> open_full_checkpoint(const std::string& path,
                                             const std::vector<std::string>& names) {
  const Checkpoint c = read_checkpoint(path);
  auto source = std::make_unique<Source>();
  CheckpointIndex& index = source->index;
  index.dir = path;
  index.strategy = "full";
  index.has_optimizer = c.has_optimizer;
  index.progress = c.progress;
  index.extra = c.metadata;
  index.files.assign(1, {});
  StateDict memory;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor* value = c.model.find(names[i]);
    TS_CHECK(value != nullptr, "load_sharded_checkpoint: '", path, "' has no 'model.", names[i],
             "'");
    const std::string prefix = optim::state_key_prefix(i);
    const Tensor* master = c.optimizer.find(prefix + "master");
    const int v = static_cast<int>(i);
    index.vectors.push_back({names[i], value->numel(), value->numel()});
    index.params.push_back({names[i], value->shape(), value->dtype(), v, 0});
    index.files[0].push_back({0, value->numel()});
    memory.set(shard_tensor_name(v, "param"), master != nullptr ? *master : *value);
    std::vector<std::string> keys;
    for (const auto& [key, t] : c.optimizer.with_prefix_removed(prefix)) {
      if (key == "step") continue;
      if (key == "master") continue;  // it is the parameter's value, above
      keys.push_back(key);
      memory.set(shard_tensor_name(v, key), t);
    }
    const Tensor* step = c.optimizer.find(prefix + "step");
    if (i == 0) {
      index.has_state = step != nullptr;
      index.step = step != nullptr ? static_cast<int64_t>(step->item()) : 0;
      index.state_keys = keys;
    }
    TS_CHECK((step != nullptr) == index.has_state && keys == index.state_keys &&
                 (step == nullptr || static_cast<int64_t>(step->item()) == index.step),
             "load_sharded_checkpoint: '", path, "': the optimizer state of parameter ", i, " ('",
             names[i], "') differs in its step or keys (", keys, ") from parameter 0's (",
             index.state_keys, ")");
  }
  for (const auto& [name, t] : c.model) {
    if (index.find(name) == nullptr) index.buffers.set(name, t);
  }
  index.param_groups = c.optimizer;
  for (const auto& [name, t] : c.optimizer) {
    if (name.rfind("param_groups.", 0) != 0) index.param_groups.erase(name);
  }
  source->reader = std::make_unique<ShardReader>(index, std::move(memory));
  return source;
}

}  // namespace checkpoint_parts
}  // namespace zero
}  // namespace dist
}  // namespace tessera
