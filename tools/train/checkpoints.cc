#include "tools/train/checkpoints.h"

#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "tensor/random.h"

namespace tessera {
namespace train {

std::optional<StartingPoint> resume(const RunContext& run, optim::LRScheduler* schedule) {
  const Config& c = run.config;
  const std::string file = resume_file(c.resume);
  const Checkpoint ckpt = read_checkpoint(file);
  if (ckpt.progress.epoch >= c.epochs) {
    // Nothing to train: say so rather than report a run of zero epochs as a result.
    if (run.lead) {
      std::printf("train: %s already completed %lld epoch%s, and --epochs is %lld: nothing to "
                  "train (raise --epochs to continue)\n",
                  file.c_str(), static_cast<long long>(ckpt.progress.epoch),
                  ckpt.progress.epoch == 1 ? "" : "s", static_cast<long long>(c.epochs));
    }
    return std::nullopt;
  }
  run.strategy.load_model_state(run.model, ckpt);
  // ZeRO-3's optimizer state is split over the ranks' shards; its checkpoints hold none.
  const bool load_optimizer = !ckpt.optimizer.empty() && run.strategy.checkpoints_optimizer();
  if (load_optimizer) run.strategy.load_optimizer_state(ckpt);
  if (run.lead && !load_optimizer) {
    std::printf("%s: the optimizer starts fresh (%s)\n", file.c_str(),
                ckpt.optimizer.empty() ? "the checkpoint holds no optimizer state"
                                       : "under --strategy=zero3 its state stays per shard");
  }
  run.precision.load_checkpoint_metadata(ckpt.metadata);
  default_generator().set_state(ckpt.progress.rng);
  if (schedule) schedule->set_epoch(ckpt.progress.epoch);
  if (run.lead) {
    std::printf("resumed from %s after epoch %lld\n", file.c_str(),
                static_cast<long long>(ckpt.progress.epoch));
  }
  return StartingPoint{ckpt.progress.epoch + 1, ckpt.progress.step};
}

void make_checkpoint_dir(const RunContext& run) {
  const std::string& path = run.config.checkpoint_dir;
  if (path.empty() || !run.lead) return;
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at == path.size() || path[at] == '/') ::mkdir(path.substr(0, at).c_str(), 0755);
  }
  struct stat st;
  TS_CHECK(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
           "train: cannot create the checkpoint directory '", path, "'");
}

void save_epoch_checkpoint(const RunContext& run, const TrainingProgress& progress) {
  const StateDict model_state = run.strategy.model_state(run.model);  // collective
  const bool with_optimizer = run.strategy.checkpoints_optimizer();
  StateDict optimizer_state;
  if (with_optimizer) optimizer_state = run.strategy.optimizer_state();  // collective: ZeRO, TP
  if (!run.lead) return;
  Metadata extra = run.precision.checkpoint_metadata();
  extra["model"] = run.config.model;
  extra["strategy"] = run.config.strategy;
  save_checkpoint(run.config.checkpoint_dir + "/last.safetensors", model_state,
                  with_optimizer ? &optimizer_state : nullptr, progress, extra);
}

}  // namespace train
}  // namespace tessera
