// A whole training state saved and loaded in one call from a user's own program, whatever the
// strategy: the model, the optimizer, the loss scaler, the schedule's epoch and the random
// stream, in one hashed file committed as the train tool commits its checkpoints
// (dist/checkpoint.h's layout: DIR/step-NNNNNNNN/checkpoint.safetensors, written under a
// temporary name and renamed into place; the two newest kept).
//
// Collective: every rank calls it. Under ZeRO, FSDP and tensor parallelism the state is spread
// over the ranks, and gathering it takes all of them; PyTorch's habit
// `if (rank == 0) save(model->state_dict())` would leave rank 0 waiting in the gather.
//
//   dist::TrainingState state;
//   state.model = model.get();  // or state.fsdp = &fsdp
//   state.optimizer = &opt;
//   state.scaler = &scaler;     // optional, as is state.schedule
//   int64_t first_epoch = 0;    // a restart, on any number of ranks, continues where it stopped:
//   if (auto done = dist::load_training_state("ckpt", state, *world)) first_epoch = done->epoch;
//   for (int64_t epoch = first_epoch; ...) {
//     ...  // train the epoch
//     dist::save_training_state("ckpt", state, {epoch + 1, step, default_generator().state()}, *world);
//   }
//
// The file is the unsplit model's (a full checkpoint): its model and optimizer state carry the
// single-process names and shapes, so it loads into one process, DDP, ZeRO-1/2 (a
// ZeroRedundancyOptimizer gathers and scatters its shards), ZeRO-3 (give `fsdp`) or tensor-
// parallel layers (gathered along their split dimension, sliced back on load), on any world size.
#pragma once

#include <optional>
#include <string>

#include "dist/checkpoint.h"
#include "dist/process_group.h"
#include "dist/zero/fully_sharded.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {

// What a checkpoint holds; null members are not saved nor loaded. One of model and fsdp.
struct TrainingState {
  nn::Module* model = nullptr;               // the model (DDP's, or one with tensor-parallel layers)
  FullyShardedDataParallel* fsdp = nullptr;  // or ZeRO-3's wrapper (its optimizer steps the shards)
  optim::Optimizer* optimizer = nullptr;     // any, ZeroRedundancyOptimizer included
  optim::GradScaler* scaler = nullptr;       // fp16 loss scaling's state
  optim::LRScheduler* schedule = nullptr;    // set to the saved epoch on load
};

// Collective over `group`. Gathers the state, and rank 0 writes and commits it in a new
// DIR/step-NNNNNNNN/ (progress.step), then removes all but the two newest committed
// checkpoints; every rank returns once it is committed, with the file's path.
std::string save_training_state(const std::string& dir, const TrainingState& state,
                                const TrainingProgress& progress, ProcessGroup& group);

// Collective over `group`. Loads `path` (a checkpoint file, a step directory, or the DIR given
// to save_training_state: its newest committed checkpoint whose every hash every rank verifies,
// passing over, with a line on rank 0's stderr, one that fails them) into `state`, restores the
// default generator from it, and returns its progress. Nothing when `path` is a directory with
// no committed checkpoint yet (a first run). A checkpoint named explicitly that fails its hashes,
// or that does not fit the model or optimizer, is an error naming the file and the tensor.
std::optional<TrainingProgress> load_training_state(const std::string& path,
                                                    const TrainingState& state, ProcessGroup& group);

}  // namespace dist
}  // namespace tessera
