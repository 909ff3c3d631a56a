// A training run's --metrics file read back (train --metrics=FILE writes it; tools/train/
// metrics.h): its step lines and its epoch lines, each quantity a curve against the step or the
// elapsed time, and the figures `explain curves` tabulates.
//
//   {"kind": "step", "step": 7, "epoch": 1, "elapsed_seconds": 0.41, "loss": 1.02, "lr": 0.001,
//    "images_per_second": 2210[, "loss_scale": 65536]}
//   {"kind": "epoch", "epoch": 1, "step": 31, "elapsed_seconds": 2.3, "train_loss": 0.83,
//    "test_accuracy": 0.71, ...}
//
// Every error names the file, and the line and the value where one is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {
namespace explain {

// One point of a curve: x (the step, or seconds since the run began), y.
struct CurvePoint {
  double x = 0, y = 0;
};

// What a run's curves can show: per step loss, loss scale and images/s; per epoch test accuracy.
enum class Quantity { kLoss, kAccuracy, kLossScale, kThroughput };
const std::vector<Quantity>& all_quantities();
const char* quantity_name(Quantity q);  // loss, accuracy, loss-scale, throughput
const char* quantity_label(Quantity q);  // "loss", "test accuracy", "loss scale", "images/s"
Quantity parse_quantity(const std::string& name);
const char* missing_reason(Quantity q);  // why a run may lack q ("no epoch line: ...")

struct MetricsLine {
  int line = 0;  // 1-based, in the file
  double step = 0, elapsed_seconds = 0;
  double loss = 0, images_per_second = 0;  // step lines
  std::optional<double> loss_scale;        // step lines, while a GradScaler scales the loss
  double train_loss = 0, test_accuracy = 0;  // epoch lines
};

struct MetricsRun {
  std::string path;
  std::string label;  // its name in tables and legends (explain curves --label); "" for the file's
  std::vector<MetricsLine> steps, epochs;

  bool has(Quantity q) const;
  // The quantity against the step (by_time false) or elapsed seconds; throws naming the file
  // when the run has none of it.
  std::vector<CurvePoint> curve(Quantity q, bool by_time) const;
};

// Throws naming the file when it cannot be read or holds no step line, and the file and line
// (and the value) when a line is not a JSON object of a known kind or a field is missing or not
// a number.
MetricsRun read_metrics(const std::string& path);

// The table's figures of one run.
struct RunSummary {
  int64_t steps = 0, epochs = 0;
  double last_step = 0, elapsed_seconds = 0;  // of the last line
  double final_loss = 0;                      // the last step's loss
  std::optional<double> final_train_loss;     // the last epoch's (mean over its steps and ranks)
  std::optional<double> best_accuracy;        // the highest epoch test accuracy
  double mean_images_per_second = 0;          // the mean of the step lines' images/s
};
RunSummary summarize(const MetricsRun& run);

}  // namespace explain
}  // namespace tessera
