#include "dist/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "tensor/atomic_file.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {
// Unchanged by the content hashes (extra metadata, which readers before them skip).
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
  save_safetensors(path, all, meta, ContentHashes::kWrite);
}

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, const TrainingProgress& progress,
                     const Metadata& extra) {
  const StateDict optimizer_state = optimizer != nullptr ? optimizer->state_dict() : StateDict();
  save_checkpoint(path, model.state_dict(), optimizer != nullptr ? &optimizer_state : nullptr,
                  progress, extra);
}

Checkpoint read_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);  // every hash checked
  const auto format = file.metadata.find("format");
  TS_CHECK(format != file.metadata.end() && format->second == kFormat, "load_checkpoint: '", path,
           "' is not a ", kFormat, " file (format '",
           format == file.metadata.end() ? std::string("none") : format->second, "')");
  Checkpoint c;
  c.path = path;
  c.hashed = file.hashed;
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

// ---- A run's checkpoint directory ----------------------------------------------------------------

namespace {

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A step directory's name, "step-00000150" or "step-00000150.2": its step and serial.
bool parse_step_dir(const std::string& name, int64_t* step, int64_t* serial) {
  const std::string lead = "step-";
  if (name.compare(0, lead.size(), lead) != 0) return false;
  const size_t dot = name.find('.', lead.size());
  const std::string digits = name.substr(lead.size(), dot == std::string::npos ? dot : dot - lead.size());
  const std::string after = dot == std::string::npos ? "1" : name.substr(dot + 1);
  for (const std::string& d : {digits, after}) {
    if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
  }
  *step = std::stoll(digits);
  *serial = dot == std::string::npos ? 0 : std::stoll(after);
  return true;
}

struct StepDir {
  std::string path;
  int64_t step, serial;
  bool committed;
};

// Every step directory under `dir`, newest first.
std::vector<StepDir> step_dirs(const std::string& dir) {
  std::vector<StepDir> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    int64_t step = 0, serial = 0;
    if (!e.is_directory(ec) || !parse_step_dir(e.path().filename().string(), &step, &serial)) {
      continue;
    }
    const std::string path = e.path().string();
    out.push_back({path, step, serial, checkpoint_at(path).has_value()});
  }
  std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) {
    return std::tie(a.step, a.serial) > std::tie(b.step, b.serial);
  });
  return out;
}

std::string joined(const std::string& dir, const std::string& name) {
  return dir + (!dir.empty() && dir.back() == '/' ? "" : "/") + name;
}

}  // namespace

std::string checkpoint_save_dir(const std::string& dir, int64_t step, int64_t serial) {
  char name[48];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return joined(dir, name) + (serial > 0 ? "." + std::to_string(serial) : "");
}

std::optional<std::string> checkpoint_at(const std::string& path) {
  if (is_file(path)) return path;
  if (!is_directory(path)) return std::nullopt;
  if (is_file(joined(path, kCheckpointFile))) return joined(path, kCheckpointFile);
  if (is_file(joined(path, kIndexFile))) return path;
  return std::nullopt;
}

std::vector<CommittedCheckpoint> committed_checkpoints(const std::string& dir) {
  std::vector<CommittedCheckpoint> out;
  for (const StepDir& d : step_dirs(dir)) {
    if (d.committed) out.push_back({*checkpoint_at(d.path), d.step});
  }
  // The layout before: one file, or one sharded directory, rewritten in place by every save;
  // when both are there, the one written last first.
  std::vector<std::pair<fs::file_time_type, std::string>> earlier;
  std::error_code ec;
  for (const std::string& commit : {joined(dir, "last.safetensors"),
                                    joined(joined(dir, "last-sharded"), kIndexFile)}) {
    if (!is_file(commit)) continue;
    const fs::file_time_type written = fs::last_write_time(commit, ec);
    earlier.emplace_back(written, commit == joined(dir, "last.safetensors")
                                      ? commit
                                      : joined(dir, "last-sharded"));
  }
  std::sort(earlier.rbegin(), earlier.rend());
  for (const auto& [time, path] : earlier) out.push_back({path, -1});
  return out;
}

int64_t begin_checkpoint_save(const std::string& dir, int64_t step) {
  int64_t serial = 0;
  for (const StepDir& d : step_dirs(dir)) {
    if (!d.committed) {
      std::error_code ec;
      fs::remove_all(d.path, ec);
      TS_CHECK(!ec, "save_checkpoint: cannot remove '", d.path, "', left by a save that did not "
               "finish: ", ec.message());
    } else if (d.step == step) {
      serial = std::max(serial, d.serial + 1);
    }
  }
  const std::string path = checkpoint_save_dir(dir, step, serial);
  std::error_code ec;
  fs::create_directories(path, ec);
  TS_CHECK(!ec && is_directory(path), "save_checkpoint: cannot create the directory '", path,
           "': ", ec ? ec.message() : "not a directory");
  sync_directory(dir, "save_checkpoint");
  return serial;
}

void remove_old_checkpoints(const std::string& dir, int keep) {
  int kept = 0;
  for (const StepDir& d : step_dirs(dir)) {
    if (d.committed && kept < keep) {
      ++kept;
      continue;
    }
    std::error_code ec;
    for (const char* commit : {kCheckpointFile, kIndexFile}) fs::remove(joined(d.path, commit), ec);
    fs::remove_all(d.path, ec);
    TS_CHECK(!ec, "save_checkpoint: cannot remove the old checkpoint '", d.path, "': ",
             ec.message());
  }
  sync_directory(dir, "save_checkpoint");
}

}  // namespace tessera
