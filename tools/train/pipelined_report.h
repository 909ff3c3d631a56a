// --strategy=pipeline's figures in the final JSON: what each rank's stage measured over the
// whole run, gathered to rank 0, beside the bubble the schedule predicts for the K, M and v that
// ran:
//
//   "pipeline": {"stages": 2, "micro_batches": 4, ..., "bubble_theory": 0.2,
//                "bubble_measured": 0.31,                 the mean of the ranks' idle fractions
//                "idle_fraction_per_rank": [0.2800, 0.3400],
//                "peak_activation_bytes": [...], "peak_held_bytes": [...]}     one per rank
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "pipeline/executor.h"
#include "pipeline/pipe.h"

namespace tessera {
namespace train {

// Adds one step's stats to the run's: busy and step times summed, so the idle fraction is the
// run's, and the peaks the largest of any step.
void accumulate(pipeline::StageStats& run, const pipeline::StageStats& step);

// Every rank's run figures, by world rank.
struct PerRankFigures {
  std::vector<double> idle_fraction;
  std::vector<int64_t> peak_activation_bytes;
  std::vector<int64_t> peak_held_bytes;
  double mean_idle_fraction() const;
};

// Collective over `world`: this rank's run stats, and every other rank's.
PerRankFigures gather_per_rank(const pipeline::StageStats& run, dist::ProcessGroup& world);

// The "pipeline" object: the pipe's shape (K, schedule, v, balance), M as run and as asked
// (--micro-batches), --dp-strategy, the bubble's formula and the ranks' figures.
std::string pipeline_json(const pipeline::Pipe& pipe, int microbatches, int requested_microbatches,
                          const std::string& dp_strategy, const PerRankFigures& ranks);

}  // namespace train
}  // namespace tessera
