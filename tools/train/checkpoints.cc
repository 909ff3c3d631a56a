#include "tools/train/checkpoints.h"

#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "tensor/random.h"

namespace tessera {
namespace train {

namespace {

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// "DIR already completed 3 epochs ...": nothing to train.
bool nothing_left(const RunContext& run, const std::string& file, int64_t epoch) {
  if (epoch < run.config.epochs) return false;
  if (run.lead) {
    std::printf("train: %s already completed %lld epoch%s, and --epochs is %lld: nothing to "
                "train (raise --epochs to continue)\n",
                file.c_str(), static_cast<long long>(epoch), epoch == 1 ? "" : "s",
                static_cast<long long>(run.config.epochs));
  }
  return true;
}

// Everything after the model and optimizer: the loss scaler, the random stream, the schedule.
StartingPoint continue_from(const RunContext& run, const std::string& file,
                            const TrainingProgress& progress, const Metadata& metadata,
                            optim::LRScheduler* schedule) {
  run.precision.load_checkpoint_metadata(metadata);
  default_generator().set_state(progress.rng);
  if (schedule) schedule->set_epoch(progress.epoch);
  if (run.lead) {
    std::printf("resumed from %s after epoch %lld\n", file.c_str(),
                static_cast<long long>(progress.epoch));
  }
  return StartingPoint{progress.epoch + 1, progress.step};
}

}  // namespace

std::optional<StartingPoint> resume(const RunContext& run, optim::LRScheduler* schedule) {
  const Config& c = run.config;
  const std::string file = resume_file(c.resume);
  if (is_directory(file)) {
    // A sharded checkpoint (dist/zero/sharded_checkpoint.h), written on any world size: each
    // rank reads what it holds, the optimizer's state included.
    Metadata metadata;
    const TrainingProgress progress = run.strategy.load_sharded(file, &metadata);
    if (nothing_left(run, file, progress.epoch)) return std::nullopt;
    return continue_from(run, file, progress, metadata, schedule);
  }
  const Checkpoint ckpt = read_checkpoint(file);
  if (nothing_left(run, file, ckpt.progress.epoch)) return std::nullopt;
  run.strategy.load_model_state(run.model, ckpt);
  // ZeRO-3's optimizer state is split over the ranks' shards; its full checkpoints hold none
  // (its sharded ones do).
  const bool load_optimizer = !ckpt.optimizer.empty() && run.strategy.checkpoints_optimizer();
  if (load_optimizer) run.strategy.load_optimizer_state(ckpt);
  run.strategy.load_extra_state(ckpt, run.lead);
  if (run.lead && !load_optimizer) {
    std::printf("%s: the optimizer starts fresh (%s)\n", file.c_str(),
                ckpt.optimizer.empty() ? "the checkpoint holds no optimizer state"
                                       : "under --strategy=zero3 a full checkpoint's optimizer "
                                         "state is not read; --checkpoint-format=sharded keeps it");
  }
  return continue_from(run, file, ckpt.progress, ckpt.metadata, schedule);
}

void make_checkpoint_dir(const RunContext& run) {
  const std::string& path = run.config.checkpoint_dir;
  if (path.empty() || !run.lead) return;
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at == path.size() || path[at] == '/') ::mkdir(path.substr(0, at).c_str(), 0755);
  }
  if (run.config.checkpoint_format == "sharded") {
    ::mkdir(sharded_checkpoint_dir(path).c_str(), 0755);  // every rank writes its shard there
  }
  const std::string made =
      run.config.checkpoint_format == "sharded" ? sharded_checkpoint_dir(path) : path;
  TS_CHECK(is_directory(made), "train: cannot create the checkpoint directory '", made, "'");
}

void save_epoch_checkpoint(const RunContext& run, const TrainingProgress& progress) {
  Metadata extra = run.precision.checkpoint_metadata();
  extra["model"] = run.config.model;
  extra["strategy"] = run.config.strategy;
  if (run.config.checkpoint_format == "sharded") {
    // Collective: no gather; each rank writes its shard, rank 0 the index last.
    run.strategy.save_sharded(sharded_checkpoint_dir(run.config.checkpoint_dir), progress, extra);
    return;
  }
  const StateDict model_state = run.strategy.model_state(run.model);  // collective
  const bool with_optimizer = run.strategy.checkpoints_optimizer();
  StateDict optimizer_state;
  if (with_optimizer) optimizer_state = run.strategy.optimizer_state();  // collective: ZeRO, TP
  const StateDict extra_state = run.strategy.extra_state();  // collective: every rank's hook state
  if (!run.lead) return;
  save_checkpoint(run.config.checkpoint_dir + "/last.safetensors", model_state,
                  with_optimizer ? &optimizer_state : nullptr, progress, extra, extra_state);
}

}  // namespace train
}  // namespace tessera
