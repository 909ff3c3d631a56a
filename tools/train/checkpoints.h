// The train tool's checkpoints: --checkpoint-dir gets DIR/last.safetensors after every epoch
// (written atomically: a killed run leaves the previous one whole), and --resume=FILE|DIR
// continues a run from one, under any strategy.
#pragma once

#include <cstdint>
#include <optional>

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

// Collective. Restores the model, the optimizer (unless the strategy's checkpoints hold none),
// the loss scaler, the random generator and the schedule from --resume. Nothing (and a line
// saying so) when the checkpoint has already done all --epochs.
std::optional<StartingPoint> resume(const RunContext& run, optim::LRScheduler* schedule);

// Rank 0 creates --checkpoint-dir (and its parents); an error naming it when that fails.
void make_checkpoint_dir(const RunContext& run);

// Collective: DIR/last.safetensors with the whole model under its unpipelined names (so any
// strategy resumes from it), the optimizer's state unless split over pipeline stages, the
// progress and the loss scaler's state.
void save_epoch_checkpoint(const RunContext& run, const TrainingProgress& progress);

}  // namespace train
}  // namespace tessera
