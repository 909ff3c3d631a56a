// The pipeline grid on a clock: where each F, B and W of a schedule starts when a forward takes
// F, a backward B and a split W its own time, messages free — pipeline/timing_model.h's rules
// (a rank runs its list in order; a computation waits for its inputs, a receive for its send),
// kept per action so `explain pipeline --plot` can draw each cell as long as it lasts: with
// --backward-ratio=2 every B is twice as wide as an F. The makespan equals play_timed()'s for
// the same times (tests/tools/explain_pipeline_test checks it through the JSON).
#pragma once

#include <vector>

#include "pipeline/schedule.h"
#include "pipeline/timing_model.h"

namespace tessera {
namespace explain {

struct TimedCell {
  int stage = 0;
  pipeline::Action action;
  double start = 0, duration = 0;
};

// Computations only (F, B, W), in the order they were placed.
std::vector<TimedCell> timed_cells(const std::vector<std::vector<pipeline::Action>>& lists, int chunks,
                                   const pipeline::StageTimes& times);

}  // namespace explain
}  // namespace tessera
