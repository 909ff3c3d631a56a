// The train tool's checkpoints. --checkpoint-dir=DIR saves after every epoch into a directory of
// its own, DIR/step-NNNNNNNN/ (the optimizer step), committed by its last file: the full
// checkpoint's file, or a sharded checkpoint's index once every rank's shard is on disk
// (dist/checkpoint.h, dist/zero/sharded_checkpoint.h). The previous committed checkpoint stays
// until then; afterwards the two newest are kept. --resume=FILE|DIR continues a run from one,
// under any strategy, every tensor's hash checked first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "tools/train/context.h"

namespace tessera {
namespace train {

// Where training starts: the first epoch to run and the optimizer steps already taken.
struct StartingPoint {
  int64_t first_epoch = 1;
  int64_t step = 0;
};

// What --resume names, in the order to try: a checkpoint file, or one checkpoint's directory
// (a step directory, a sharded checkpoint's), alone (`fallback` false); for a run's
// --checkpoint-dir its committed checkpoints, newest first (`fallback` true: when one fails its
// hashes the next older is tried). An error naming the path when there is none.
struct ResumeCandidates {
  std::vector<std::string> paths;
  bool fallback = false;
};
ResumeCandidates resume_candidates(const std::string& resume);

// Collective. Restores the model, the optimizer (unless the strategy's checkpoints hold none),
// the loss scaler, the random generator and the schedule from --resume: the first candidate
// whose hashes every rank verifies (saying why each newer one was passed over); a checkpoint
// named explicitly that fails them is an error. Nothing (and a line saying so) when the
// checkpoint has already done all --epochs.
std::optional<StartingPoint> resume(const RunContext& run, optim::LRScheduler* schedule);

// Rank 0 creates --checkpoint-dir (and its parents); an error naming it when that fails.
void make_checkpoint_dir(const RunContext& run);

// Collective: this epoch's checkpoint in a new DIR/step-NNNNNNNN/. Full: the whole model under
// its unpipelined names (so any strategy resumes from it), the optimizer's state unless split
// over pipeline stages, the progress and the loss scaler's state, written by rank 0. Sharded:
// every rank its shard, rank 0 the index last. Then rank 0 removes all but the two newest
// committed checkpoints, and what saves that were killed left.
void save_epoch_checkpoint(const RunContext& run, const TrainingProgress& progress);

}  // namespace train
}  // namespace tessera
