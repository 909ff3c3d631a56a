// What explain ddp and explain zero3 share when they show a traced step: its events as table rows
// and JSON lines, and every rank's lanes as a picture.
#pragma once

#include <string>
#include <vector>

#include "tools/explain/flags.h"
#include "tools/explain/table.h"
#include "tools/explain/trace_events.h"

namespace tessera {
namespace explain {

// The flags of a traced view (--trace=FILE [--rank=R] [--step=S] [--json] [--plot=FILE.svg]),
// checked, and the trace they name, read.
struct TracedSteps {
  Trace trace;
  int rank = 0;
  std::vector<int64_t> steps;  // --step, or every step of the trace
  bool json = false;
  std::string plot;
};
TracedSteps read_traced_steps(Flags& flags, const std::string& command);

// Every event of `rank` in `step` by start time (the step's own span left out).
std::vector<const TraceEvent*> step_events(const Trace& trace, int rank, int64_t step);

// A table of `events`: start (ms from `origin_ms`), duration, track, event.
Table events_table(const Trace& trace, const std::vector<const TraceEvent*>& events, double origin_ms);

// One JSON line per event: step, rank, track, event, kind, start_ms (from origin_ms), ms, and
// bucket, elements, unit, layer when the event has them.
void print_event_lines(const Trace& trace, const std::vector<const TraceEvent*>& events,
                       double origin_ms);

// `step` of every rank, a lane per rank and track (empty tracks left out), as SVG; --plot writes
// it to `path`.
std::string step_timeline_svg(const Trace& trace, int64_t step, const std::string& title);
void write_step_plot(const Trace& trace, int64_t step, const std::string& path, const std::string& title);

}  // namespace explain
}  // namespace tessera
