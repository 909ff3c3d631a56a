// The training loop. An epoch is the strategy's steps over this replica's shard, each step
// checked by the NaN guard and stepped through the loss scaler; after it, every rank averages
// the loss, evaluates, rank 0 prints the epoch's line and metrics, and the checkpoint is saved:
//
//   for epoch in first..--epochs:
//     for batch:  train_step -> check_finite_step -> precision.step -> after_step -> step metrics
//     schedule.step, average loss, sync_buffers, evaluate, epoch line, epoch metrics, checkpoint
#pragma once

#include <array>
#include <cstdint>

#include "dist/byte_ledger.h"
#include "dist/straggler.h"
#include "optim/lr_scheduler.h"
#include "tools/train/checkpoints.h"
#include "tools/train/context.h"
#include "tools/train/data.h"
#include "tools/train/fault_injection.h"
#include "tools/train/memory_report.h"
#include "tools/train/metrics.h"
#include "tools/train/report.h"

namespace tessera {
namespace train {

// The figures of the epochs run, for the final report.
struct RunTotals {
  double train_loss = 0;  // the last epoch's, averaged over the ranks
  double accuracy = 0;    // the last epoch's test accuracy (an image model's)
  double val_loss = 0;    // the last epoch's validation loss (a language model's)
  double train_seconds = 0;
  int64_t train_images = 0, train_steps = 0;
  std::vector<double> step_seconds;  // this rank's, each training step's (for the spread)
  // This rank's seconds blocked on offload transfers during the steps (the I/O not hidden).
  double io_wait_seconds = 0;
  int64_t train_comm_bytes = 0;  // sent during training steps (not evaluation), summed over groups
  // The same per kind of collective (calls and bytes, summed over groups), for the JSON's
  // "comm_per_step" and `explain comm --run` (dist/byte_ledger.h's kinds, in its order).
  std::array<dist::LedgerEntry, static_cast<size_t>(dist::CollectiveKind::kCount)> train_comm{};
  int64_t skipped_steps = 0;     // fp16 steps the loss scaler skipped
  MemoryReport memory;           // model states, measured once the optimizer has stepped
  dist::StragglerEmulation straggler;  // --straggler: the sleeps of this rank, if it is the one
  FaultInjection fault;                // --inject-fault
};

// Collective. Resets the peak-memory counters and the groups' byte ledgers first, so what the
// final report prints is the training's own.
RunTotals train_epochs(const RunContext& run, const Loaders& loaders,
                       optim::LRScheduler* schedule, StartingPoint start, MetricsFile& metrics);

}  // namespace train
}  // namespace tessera
