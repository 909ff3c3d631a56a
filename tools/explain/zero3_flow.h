// One ZeRO-3 (FSDP) step read from a trace (train --strategy=zero3 --trace): each unit's
// all-gather, computation, free and reduce-scatter in the order they happened, the lecture's
// FSDP flow:
//
//   comm     [gather u0][gather u1]          [gather u1][gather u0]   [reduce_scatter u1][rs u0]
//   compute             [fwd u0] free u0 [fwd u1] free u1 [bwd u1] free u1 [bwd u0] free u0
//
// and per unit the counts and times: with reshard_after_forward, two gathers (forward and
// backward), two frees and one reduce-scatter per step.
#pragma once

#include <string>
#include <vector>

#include "tools/explain/trace_events.h"

namespace tessera {
namespace explain {

struct Zero3Unit {
  std::string name;
  int64_t elements = 0;  // padded, as gathered
  int gathers = 0, frees = 0, reduce_scatters = 0;
  double gather_ms = 0, reduce_scatter_ms = 0, forward_ms = 0, backward_ms = 0;
};

struct Zero3Step {
  int rank = 0;
  int64_t step = 0;
  std::vector<const TraceEvent*> flow;  // the units' events, by start time
  std::vector<Zero3Unit> units;         // in the order each first appears
  double step_start_ms = 0;             // the step's first event
};

// The ZeRO-3 step `step` of `rank`. Throws naming the file when the trace has no unit events
// there (a trace of another strategy).
Zero3Step zero3_step(const Trace& trace, int rank, int64_t step);

}  // namespace explain
}  // namespace tessera
