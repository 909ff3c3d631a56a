// The schedule grid: stages down, time slots across, one cell per forward (F) or backward (B),
// as the GPipe and 1F1B papers draw them. Cells come from the validator's simulated clock, so
// the picture shows the bubble the lists really produce. K = 2, M = 4, 1F1B:
//
//   1f1b  K=2 M=4
//   slot      0   1   2   3   4   5   6   7   8   9
//   stage 0   F0  F1  .   B0  F2  B1  F3  B2  .   B3
//   stage 1   .   F0  B0  F1  B1  F2  B2  F3  B3  .
//   stage 0: peak in flight 2, idle 0.200
//   stage 1: peak in flight 1, idle 0.200
//   bubble: theory (K-1)/(vM+K-1) = 1/5 = 0.200, simulated 0.200 (K=2 M=4 v=1)
//
// With v > 1 chunks a cell reads F<mb>.<chunk>. Zero-bubble lists draw their W passes as cells
// of their own (W3), and their report adds each stage's peak pending W and the bubble without a
// flush (pipeline/zero_bubble.h has the grids).
#pragma once

#include <string>

#include "pipeline/schedule.h"
#include "pipeline/timing_model.h"
#include "pipeline/validator.h"

namespace tessera {
namespace pipeline {

// The grid of an already validated schedule, followed by report.str().
std::string draw_grid(const ValidationReport& report);

// Builds, validates and draws a schedule: what `explain pipeline` prints.
std::string explain(ScheduleKind kind, int stages, int microbatches, int chunks = 1);

// The same lists played by the timing model with every stage's times `times`
// (timing_model.h's convention for B and W): the step, its bubble with a flush and without, and
// for ZB-H1 the closed form beside them. What `explain pipeline --backward-ratio=R` adds.
std::string explain_timing(ScheduleKind kind, int stages, int microbatches, int chunks,
                           const StageTimes& times);

}  // namespace pipeline
}  // namespace tessera
