// --inject-fault, a testing aid. crash:RANK:STEP|stall:RANK:STEP: at optimizer step STEP
// (counted from the start of training, across epochs, 1-based) rank RANK dies (SIGKILL, as a
// lost node would) or stops answering (sleeps forever inside the training loop, as a hung
// kernel would). With the first the job ends (mpirun takes down the other ranks); with the
// second the other ranks' next collective times out (--collective-timeout) and ends the job.
//
// crash-in-epoch:RANK:EPOCH: rank RANK dies (SIGKILL) after its first optimizer step of epoch
// EPOCH (1-based), wherever that step falls (the composition tests restart every strategy so,
// on any number of ranks).
//
// crash-in-save:RANK:STEP:PHASE: rank RANK dies (SIGKILL) inside the first sharded checkpoint
// save at or after step STEP, at PHASE (dist/zero/sharded_checkpoint.h): mid-shard (its shard in
// its temporary file, not yet renamed into place), before-index (every rank's shard on disk, the
// index not written) or mid-index (rank 0: the index in its temporary file). The previous
// committed checkpoint must be what a restart resumes from.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {
namespace train {

class FaultInjection {
 public:
  FaultInjection() = default;  // none
  // "crash:1:5", "stall:0:3", "crash-in-epoch:1:2", "crash-in-save:0:20:before-index"; throws
  // naming what was wrong.
  static FaultInjection parse(const std::string& text);
  bool enabled() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  // Called after every optimizer step (`step` counted over the run, `batch` within `epoch`,
  // both 1-based); fires on the chosen rank at the chosen step.
  void after_step(int my_rank, int64_t step, int64_t epoch, int64_t batch) const;
  // crash-in-save: whether the save after step `step` is armed (at or after STEP), and, called
  // at each phase of it, the crash on the chosen rank at the chosen phase.
  bool armed_for_save(int64_t step) const { return kind_ == Kind::kCrashInSave && step >= step_; }
  void at_save_phase(int my_rank, const std::string& phase) const;

 private:
  enum class Kind { kCrash, kStall, kCrashInEpoch, kCrashInSave };
  Kind kind_ = Kind::kCrash;
  int rank_ = -1;
  int64_t step_ = 0;  // crash-in-epoch: the epoch
  std::string phase_;  // crash-in-save
};

}  // namespace train
}  // namespace tessera
