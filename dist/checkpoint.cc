#include "dist/checkpoint.h"

namespace tessera {

namespace {
constexpr const char* kFormat = "tessera-checkpoint-1";

uint64_t metadata_uint(const Metadata& m, const std::string& key, const std::string& path) {
  const auto it = m.find(key);
  TS_CHECK(it != m.end(), "load_checkpoint: '", path, "' has no '", key,
           "' in its metadata (not a tessera checkpoint?)");
  const std::string& text = it->second;
  TS_CHECK(!text.empty() && text.size() <= 20 &&
               text.find_first_not_of("0123456789") == std::string::npos,
           "load_checkpoint: '", path, "': metadata '", key, "' = '", text,
           "' is not a non-negative integer");
  return std::stoull(text);
}
}  // namespace

void save_checkpoint(const std::string& path, const StateDict& model_state,
                     const StateDict* optimizer_state, const TrainingProgress& progress,
                     const Metadata& extra, const StateDict& extra_state) {
  StateDict all;
  all.merge(model_state, "model.");
  if (optimizer_state != nullptr) all.merge(*optimizer_state, "optimizer.");
  all.merge(extra_state, "extra.");
  Metadata meta = extra;
  meta["format"] = kFormat;
  meta["epoch"] = std::to_string(progress.epoch);
  meta["step"] = std::to_string(progress.step);
  meta["rng_seed"] = std::to_string(progress.rng.seed);
  meta["rng_offset"] = std::to_string(progress.rng.offset);
  meta["has_optimizer"] = optimizer_state != nullptr ? "1" : "0";
  save_safetensors(path, all, meta);
}

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, const TrainingProgress& progress,
                     const Metadata& extra) {
  const StateDict optimizer_state = optimizer != nullptr ? optimizer->state_dict() : StateDict();
  save_checkpoint(path, model.state_dict(), optimizer != nullptr ? &optimizer_state : nullptr,
                  progress, extra);
}

Checkpoint read_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  const auto format = file.metadata.find("format");
  TS_CHECK(format != file.metadata.end() && format->second == kFormat, "load_checkpoint: '", path,
           "' is not a ", kFormat, " file (format '",
           format == file.metadata.end() ? std::string("none") : format->second, "')");
  Checkpoint c;
  c.path = path;
  c.model = file.tensors.with_prefix_removed("model.");
  c.has_optimizer = file.metadata["has_optimizer"] == "1";
  if (c.has_optimizer) c.optimizer = file.tensors.with_prefix_removed("optimizer.");
  c.extra = file.tensors.with_prefix_removed("extra.");
  c.progress.epoch = static_cast<int64_t>(metadata_uint(file.metadata, "epoch", path));
  c.progress.step = static_cast<int64_t>(metadata_uint(file.metadata, "step", path));
  c.progress.rng.seed = metadata_uint(file.metadata, "rng_seed", path);
  c.progress.rng.offset = metadata_uint(file.metadata, "rng_offset", path);
  c.metadata = std::move(file.metadata);
  return c;
}

void load_model_state(const Checkpoint& c, nn::Module& model) {
  // state_entries(), not state_dict(): a tensor-parallel layer's state_dict() gathers its full
  // weights, which a dtype check does not need.
  for (const nn::Module::StateEntry& own : model.state_entries()) {
    const std::string& name = own.name;
    const Tensor* saved = c.model.find(name);
    if (saved == nullptr) continue;  // the strict load below names missing keys
    TS_CHECK(std::string(dtype_kind(saved->dtype())) == dtype_kind(own.dtype), "load_checkpoint: '",
             c.path, "': 'model.", name, "' is ", saved->dtype(), ", but the model's '", name,
             "' is ", own.dtype, " (", dtype_kind(saved->dtype()), " and ", dtype_kind(own.dtype),
             " tensors do not convert: a relabelled or foreign file?)");
  }
  try {
    model.load_state_dict(c.model);
  } catch (const Error& e) {
    TS_FAIL("load_checkpoint: '", c.path, "' (tensors 'model.*'): ", e.message());
  }
}

void load_optimizer_state(const Checkpoint& c, optim::Optimizer& optimizer) {
  TS_CHECK(c.has_optimizer, "load_checkpoint: '", c.path, "' holds no optimizer state");
  try {
    optimizer.load_state_dict(c.optimizer);
  } catch (const Error& e) {
    TS_FAIL("load_checkpoint: '", c.path, "' (tensors 'optimizer.*'): ", e.message());
  }
}

TrainingProgress load_checkpoint(const std::string& path, nn::Module& model,
                                 optim::Optimizer* optimizer, Metadata* metadata) {
  const Checkpoint c = read_checkpoint(path);
  load_model_state(c, model);
  if (optimizer != nullptr) load_optimizer_state(c, *optimizer);
  if (metadata != nullptr) *metadata = c.metadata;
  return c.progress;
}

}  // namespace tessera
