#include "dist/training_state/training_state.h"

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "dist/reduce_scalar.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/zero/fully_sharded_optimizer_state.h"
#include "dist/zero/sharded_checkpoint.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

const char* const kScalerPrefix = "scaler.";

void check_state(const TrainingState& state, const char* who) {
  TS_CHECK((state.model != nullptr) != (state.fsdp != nullptr), who, ": give the model or the "
           "FullyShardedDataParallel wrapping it (one of TrainingState::model and ::fsdp), got ",
           state.model == nullptr && state.fsdp == nullptr ? "neither" : "both");
}

// The optimizer's state as the unsplit model's optimizer would hold it (collective: ZeRO's
// shards and tensor-parallel slices are gathered).
StateDict full_optimizer_state(const TrainingState& state) {
  if (state.fsdp != nullptr) return zero::gather_optimizer_state(*state.fsdp, *state.optimizer);
  return tensor_parallel::gather_optimizer_state(state.optimizer->state_dict(), *state.model,
                                                 state.optimizer->parameters());
}

// The candidates `path` names, newest first; whether it named a run's directory (fall back).
std::vector<std::string> candidates(const std::string& path, bool* fallback) {
  if (const std::optional<std::string> one = checkpoint_at(path)) {
    *fallback = false;
    return {*one};
  }
  *fallback = true;
  std::vector<std::string> out;
  for (const CommittedCheckpoint& c : committed_checkpoints(path)) out.push_back(c.path);
  return out;
}

}  // namespace

std::string save_training_state(const std::string& dir, const TrainingState& state,
                                const TrainingProgress& progress, ProcessGroup& group) {
  check_state(state, "save_training_state");
  const StateDict model_state = state.fsdp != nullptr ? state.fsdp->state_dict()
                                                      : state.model->state_dict();  // collective
  StateDict optimizer_state;
  if (state.optimizer != nullptr) optimizer_state = full_optimizer_state(state);  // collective
  StateDict extra;
  if (state.scaler != nullptr) {
    for (const auto& [name, t] : state.scaler->state_dict()) extra.set(kScalerPrefix + name, t);
  }
  // Rank 0 writes and commits; its save's serial (checkpoint_save_dir) goes to every rank after
  // the commit, so each returns the same path once the file is in place.
  double serial = 0;
  if (group.rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    TS_CHECK(std::filesystem::is_directory(dir), "save_training_state: cannot create the "
             "checkpoint directory '", dir, "'", ec ? ": " + ec.message() : std::string());
    serial = static_cast<double>(begin_checkpoint_save(dir, progress.step));
    save_checkpoint(checkpoint_save_dir(dir, progress.step, static_cast<int64_t>(serial)) + "/" +
                        kCheckpointFile,
                    model_state, state.optimizer != nullptr ? &optimizer_state : nullptr, progress,
                    {}, extra);  // renamed into place: committed
    remove_old_checkpoints(dir);
  }
  Tensor committed = full({1}, serial, kF64);
  group.broadcast(committed, 0)->wait();
  return checkpoint_save_dir(dir, progress.step, static_cast<int64_t>(committed.item())) + "/" +
         kCheckpointFile;
}

std::optional<TrainingProgress> load_training_state(const std::string& path,
                                                    const TrainingState& state, ProcessGroup& group) {
  check_state(state, "load_training_state");
  bool fallback = false;
  const std::vector<std::string> paths = candidates(path, &fallback);
  for (const std::string& file : paths) {
    // Every rank checks every hash, and all agree before any loads it: a corrupt checkpoint is
    // passed over by every rank alike, never half loaded.
    std::string problem;
    try {
      zero::verify_checkpoint(file);
    } catch (const Error& e) {
      problem = e.message();
    }
    if (all_reduce_scalar(problem.empty() ? 0.0 : 1.0, group, ReduceOp::kMax) > 0) {
      if (problem.empty()) problem = "another rank could not verify it";
      TS_CHECK(fallback, "load_training_state: ", file, " fails verification: ", problem);
      if (group.rank() == 0) {
        std::fprintf(stderr, "load_training_state: %s fails verification, passed over: %s\n",
                     file.c_str(), problem.c_str());
      }
      continue;
    }
    const Checkpoint ckpt = read_checkpoint(file);
    if (state.fsdp != nullptr) {
      state.fsdp->load_state_dict(ckpt.model);
    } else {
      load_model_state(ckpt, *state.model);  // tensor-parallel layers take their slices
    }
    if (state.optimizer != nullptr) {
      TS_CHECK(ckpt.has_optimizer, "load_training_state: ", file, " holds no optimizer state, "
               "and an optimizer was given to load it into");
      if (state.fsdp != nullptr) {
        zero::load_optimizer_state(ckpt.optimizer, *state.fsdp, *state.optimizer);
      } else {
        Checkpoint sliced = ckpt;
        sliced.optimizer = tensor_parallel::slice_optimizer_state(ckpt.optimizer, *state.model,
                                                                  state.optimizer->parameters());
        load_optimizer_state(sliced, *state.optimizer);
      }
    }
    if (state.scaler != nullptr) {
      StateDict scaler;
      for (const auto& [name, t] : ckpt.extra) {
        if (name.rfind(kScalerPrefix, 0) == 0) scaler.set(name.substr(std::string(kScalerPrefix).size()), t);
      }
      TS_CHECK(!scaler.empty(), "load_training_state: ", file, " holds no loss scaler state, and "
               "a scaler was given to load it into");
      state.scaler->load_state_dict(scaler);
    }
    if (state.schedule != nullptr) state.schedule->set_epoch(ckpt.progress.epoch);
    default_generator().set_state(ckpt.progress.rng);
    return ckpt.progress;
  }
  TS_CHECK(paths.empty(), "load_training_state: none of the ", paths.size(), " committed "
           "checkpoints in ", path, " passes verification (why each failed is on rank 0's stderr)");
  return std::nullopt;
}

}  // namespace dist
}  // namespace tessera
