#include "tools/train/checkpoints.h"

#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "dist/reduce_scalar.h"
#include "dist/zero/sharded_checkpoint.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tools/train/checkpoint_origin.h"
#include "tools/train/fault_injection.h"
#include "tools/train/output_paths.h"
#include "tools/train/restart_count.h"

namespace tessera {
namespace train {

namespace {

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

// Loads the checkpoint at `file` (verified already): a sharded checkpoint's directory or a full
// checkpoint's file.
std::optional<StartingPoint> load_from(const RunContext& run, const std::string& file,
                                       optim::LRScheduler* schedule) {
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

// The crash --inject-fault=crash-in-save:RANK:STEP:PHASE asks for, armed for the save at `step`
// on the first attempt only (a restarted run finishes), for as long as it lives.
class SaveFault {
 public:
  SaveFault(const RunContext& run, int64_t step) {
    const Config& c = run.config;
    if (c.inject_fault.empty() || restart_count().value_or(0) != 0) return;
    const FaultInjection fault = FaultInjection::parse(c.inject_fault);
    if (!fault.armed_for_save(step)) return;
    const int rank = run.world ? run.world->rank() : 0;
    dist::zero::set_save_phase_hook(
        [fault, rank](const std::string& phase) { fault.at_save_phase(rank, phase); });
    armed_ = true;
  }
  ~SaveFault() {
    if (armed_) dist::zero::set_save_phase_hook(nullptr);
  }
  SaveFault(const SaveFault&) = delete;
  SaveFault& operator=(const SaveFault&) = delete;

 private:
  bool armed_ = false;
};

}  // namespace

ResumeCandidates resume_candidates(const std::string& resume) {
  struct stat st;
  TS_CHECK(::stat(resume.c_str(), &st) == 0, "train: --resume=", resume, ": no such file or "
           "directory");
  ResumeCandidates out;
  if (const std::optional<std::string> one = checkpoint_at(resume)) {
    out.paths.push_back(*one);
    return out;
  }
  for (const CommittedCheckpoint& c : committed_checkpoints(resume)) out.paths.push_back(c.path);
  out.fallback = true;
  TS_CHECK(!out.paths.empty(), "train: --resume=", resume, " is a directory without "
           "last.safetensors, last-sharded/ or a committed step-*/ checkpoint (one holding its ",
           kCheckpointFile, " or ", kIndexFile, "; give a checkpoint file, a checkpoint's "
           "directory, or the --checkpoint-dir of a run)");
  return out;
}

std::optional<StartingPoint> resume(const RunContext& run, optim::LRScheduler* schedule) {
  const std::string& given = run.config.resume;
  const ResumeCandidates candidates = resume_candidates(given);
  for (const std::string& path : candidates.paths) {
    // Every rank checks every hash of the candidate, and all agree before any loads it, so a
    // corrupt checkpoint is passed over by all ranks alike and never half loaded.
    std::string problem;
    bool hashed = true;
    try {
      hashed = dist::zero::verify_checkpoint(path);
    } catch (const Error& e) {
      problem = e.message();
    }
    const bool failed =
        run.world ? dist::all_reduce_scalar(problem.empty() ? 0 : 1, *run.world,
                                            dist::ReduceOp::kMax) > 0
                  : !problem.empty();
    if (failed) {
      const bool here = !problem.empty();
      if (!here) problem = "another rank could not verify it (its error is on its stderr)";
      TS_CHECK(candidates.fallback, "train: --resume=", given, " fails verification: ", problem);
      if (run.lead) {
        std::printf("train: %s fails verification, passed over: %s\n", path.c_str(),
                    problem.c_str());
      } else if (here) {
        std::fprintf(stderr, "[rank %d] %s\n", run.world->rank(), problem.c_str());
      }
      continue;
    }
    if (!hashed && run.lead) {
      std::printf("train: %s carries no content hashes (written before tessera hashed its "
                  "checkpoints): loaded without checking them\n", path.c_str());
    }
    // Another model or optimizer than the one that wrote it: refused, naming both, before any
    // tensor is loaded (and not passed over for an older one: they were written alike).
    check_checkpoint_origin(read_checkpoint_strings(path), run.config, path, given);
    if (run.lead && path != candidates.paths.front()) {
      std::printf("train: resuming from the next older committed checkpoint, %s\n", path.c_str());
    }
    return load_from(run, path, schedule);
  }
  TS_FAIL("train: --resume=", given, ": none of its ", candidates.paths.size(),
          " committed checkpoints passes verification (why each failed is printed above)");
}

void make_checkpoint_dir(const RunContext& run) {
  const std::string& path = run.config.checkpoint_dir;
  if (path.empty() || !run.lead) return;
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at == path.size() || path[at] == '/') ::mkdir(path.substr(0, at).c_str(), 0755);
  }
  TS_CHECK(is_directory(path), "train: cannot create the checkpoint directory '", path, "'");
}

namespace {

// Writes the epoch's checkpoint (collective; rank 0 commits it).
void write_epoch_checkpoint(const RunContext& run, const TrainingProgress& progress) {
  Metadata extra = run.precision.checkpoint_metadata();
  for (const auto& [key, value] : checkpoint_origin(run.config)) extra[key] = value;
  extra["strategy"] = run.config.strategy;
  const std::string& root = run.config.checkpoint_dir;
  if (run.config.checkpoint_format == "sharded") {
    // Rank 0 makes this save's directory (removing what killed saves left) before any rank
    // writes into it: the broadcast of its serial waits for that. (Sharded: ZeRO, on the world.)
    Tensor serial = full({1}, run.lead ? static_cast<double>(begin_checkpoint_save(root, progress.step)) : 0.0,
                         kF64);
    if (run.world) run.world->broadcast(serial, 0)->wait();
    const std::string dir =
        checkpoint_save_dir(root, progress.step, static_cast<int64_t>(serial.item()));
    {
      const SaveFault fault(run, progress.step);
      // Collective: no gather; each rank writes its shard, rank 0 the index last, which commits.
      run.strategy.save_sharded(dir, progress, extra);
    }
    if (run.lead) remove_old_checkpoints(root);
    return;
  }
  const StateDict model_state = run.strategy.model_state(run.model);  // collective
  const bool with_optimizer = run.strategy.checkpoints_optimizer();
  StateDict optimizer_state;
  if (with_optimizer) optimizer_state = run.strategy.optimizer_state();  // collective: ZeRO, TP
  const StateDict extra_state = run.strategy.extra_state();  // collective: every rank's hook state
  if (!run.lead) return;
  const std::string dir =
      checkpoint_save_dir(root, progress.step, begin_checkpoint_save(root, progress.step));
  // The file, renamed into place once on disk, commits the checkpoint.
  save_checkpoint(dir + "/" + kCheckpointFile, model_state,
                  with_optimizer ? &optimizer_state : nullptr, progress, extra, extra_state);
  remove_old_checkpoints(root);
}

}  // namespace

void save_epoch_checkpoint(const RunContext& run, const TrainingProgress& progress) {
  write_epoch_checkpoint(run, progress);
  // No rank starts the next epoch before rank 0 has committed this checkpoint: a rank that
  // dies early in it (local SGD's and gossip's ranks run ahead between their exchanges) would
  // otherwise take the job, and the commit, down with it, and the restart would resume an
  // epoch earlier.
  if (run.world) run.world->barrier()->wait();
}

}  // namespace train
}  // namespace tessera
