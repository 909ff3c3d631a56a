#include "tools/train/pipelined_report.h"

#include <algorithm>

#include "pipeline/schedule.h"
#include "pipeline/timing_model.h"
#include "tensor/ops.h"
#include "tools/json/json_writer.h"

namespace tessera {
namespace train {

void accumulate(pipeline::StageStats& run, const pipeline::StageStats& step) {
  run.step_seconds += step.step_seconds;
  run.busy_seconds += step.busy_seconds;
  run.peak_activation_bytes = std::max(run.peak_activation_bytes, step.peak_activation_bytes);
  run.peak_held_bytes = std::max(run.peak_held_bytes, step.peak_held_bytes);
}

double PerRankFigures::mean_idle_fraction() const {
  double sum = 0;
  for (double idle : idle_fraction) sum += idle;
  return sum / static_cast<double>(idle_fraction.size());
}

PerRankFigures gather_per_rank(const pipeline::StageStats& run, dist::ProcessGroup& world) {
  // One all-gather of three f64 per rank (the byte counts are exact in a double).
  const int n = world.size();
  const Tensor mine = from_vector<double>({run.idle_fraction(),
                                           static_cast<double>(run.peak_activation_bytes),
                                           static_cast<double>(run.peak_held_bytes)}, {3});
  Tensor all = empty({3 * n}, kF64);
  world.all_gather(mine, all)->wait();
  const std::vector<double> v = all.to_vector<double>();
  PerRankFigures out;
  for (int r = 0; r < n; ++r) {
    out.idle_fraction.push_back(v[3 * r]);
    out.peak_activation_bytes.push_back(static_cast<int64_t>(v[3 * r + 1]));
    out.peak_held_bytes.push_back(static_cast<int64_t>(v[3 * r + 2]));
  }
  return out;
}

std::string pipeline_json(const pipeline::Pipe& pipe, int microbatches, int requested_microbatches,
                          const std::string& dp_strategy, const PerRankFigures& ranks) {
  const int k = pipe.stages();
  const int chunks = static_cast<int>(pipe.chunks().size());
  json::Array idle;
  for (double f : ranks.idle_fraction) idle.add_raw(json::fixed(f, 4));
  std::string formula;
  const double theory = pipeline::predicted_bubble(pipe.schedule(), k, microbatches, chunks, &formula);
  return json::Object()
      .add("stages", k)
      .add("micro_batches", microbatches)
      .add("micro_batches_requested", requested_microbatches)
      .add("schedule", pipeline::schedule_name(pipe.schedule()))
      .add("chunks", chunks)
      .add("dp_strategy", dp_strategy)
      .add("balance", json::Array(pipe.balance()))
      .add("bubble_formula", formula)
      .add("bubble_theory", theory)
      .add("bubble_measured", ranks.mean_idle_fraction())
      .add("idle_fraction_per_rank", idle)
      .add("peak_activation_bytes", json::Array(ranks.peak_activation_bytes))
      .add("peak_held_bytes", json::Array(ranks.peak_held_bytes))
      .str();
}

}  // namespace train
}  // namespace tessera
