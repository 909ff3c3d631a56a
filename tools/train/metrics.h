// --metrics=FILE: the run as JSON lines (rank 0 writes), one object per optimizer step and one
// per epoch end, appended, for `explain curves` to draw:
//
//   {"kind": "step", "step": 7, "epoch": 1, "elapsed_seconds": 0.41, "loss": 1.02, "lr": 0.001,
//    "images_per_second": 2210, "loss_scale": 65536}
//   {"kind": "epoch", "epoch": 1, "step": 31, "elapsed_seconds": 2.3, "train_loss": 0.83,
//    "test_accuracy": 0.71, "images_per_second": 2150, "seconds": 1.9, "lr": 0.001, ...}
//
// A step line holds this rank's loss of its own batch and the step's throughput (images of every
// replica over this rank's step time); an epoch line the loss averaged over the epoch and the
// ranks, and the test accuracy. loss_scale appears only while a GradScaler scales the loss.
// elapsed_seconds counts from the writer's creation (this process's training start). A file that
// cannot be opened or written (a full disk) is an error naming it, not metrics lost silently.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "optim/grad_scaler.h"
#include "tools/train/report.h"

namespace tessera {
namespace train {

struct StepMetrics {
  int64_t step = 0, epoch = 0;
  double loss = 0, lr = 0;
  int64_t images = 0;  // trained in this step, over every replica
  double seconds = 0;  // the step's own duration on this rank
};

struct EpochMetrics {
  int64_t epoch = 0, step = 0;
  double train_loss = 0, test_accuracy = 0, images_per_second = 0, seconds = 0, lr = 0;
  // A language model's line holds "val_loss", "val_perplexity" and "tokens_per_second" instead
  // of "test_accuracy" and "images_per_second".
  bool language_model = false;
  double val_loss = 0, tokens_per_second = 0;
};

class MetricsFile {
 public:
  // An empty path writes nothing (ranks other than 0, or no --metrics).
  explicit MetricsFile(const std::string& path);
  bool enabled() const { return out_.is_open(); }
  void step(const StepMetrics& m, const optim::GradScaler& scaler);
  void epoch(const EpochMetrics& m, const optim::GradScaler& scaler);

 private:
  void write(json::Object line, const optim::GradScaler& scaler, const char* where, int64_t at);

  std::string path_;
  std::ofstream out_;
  Clock::time_point start_;
};

}  // namespace train
}  // namespace tessera
