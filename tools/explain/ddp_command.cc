// explain ddp: one real DDP step's timeline from a trace (train --strategy=ddp --trace=FILE):
// backward layer by layer, each bucket's launch and all-reduce on the communication thread, and
// how much of the communication backward hid (ddp_timeline.h). --json prints one line per event
// and a summary line per step; --plot draws the step's lanes for every rank.
#include <cstdio>

#include "tools/explain/commands.h"
#include "tools/explain/ddp_timeline.h"
#include "tools/explain/json_line.h"
#include "tools/explain/trace_view.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain ddp --trace=FILE [--rank=R] [--step=S] [--json] [--plot=FILE.svg]\n"
    "A real DDP step from a trace (train --strategy=ddp --trace=FILE): backward layer by layer,\n"
    "each bucket's all-reduce on the communication thread, and how much of it was hidden behind\n"
    "backward (the overlap fraction: all-reduce time inside backward over all of it).\n"
    "  --trace=FILE     the Chrome trace the train tool wrote\n"
    "  --rank=R         the rank to show (default 0)\n"
    "  --step=S         the step to show (default: every step in the trace)\n"
    "  --json           one JSON object per line: each event (step, rank, track, event, kind,\n"
    "                   start_ms, ms, bucket, elements, layer), then a summary per step (layers,\n"
    "                   buckets, backward_ms, communication_ms, hidden_ms, overlap_fraction,\n"
    "                   exposed_ms)\n"
    "  --plot=FILE.svg  the (last) step shown, every rank's compute and communication lanes\n";

}  // namespace

int ddp_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const TracedSteps t = read_traced_steps(flags, "ddp");
  const Trace& trace = t.trace;
  const int rank = t.rank;
  const std::vector<int64_t>& steps = t.steps;
  for (int64_t step : steps) {
    const DdpStep s = ddp_step(trace, rank, step);
    const std::vector<const TraceEvent*> events = step_events(trace, rank, step);
    const double origin = events.front()->start_ms;
    const double backward_ms = s.backward_end_ms - s.backward_start_ms;
    if (t.json) {
      print_event_lines(trace, events, origin);
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("summary", "ddp")
                              .add("step", step)
                              .add("rank", rank)
                              .add("layers", s.layers())
                              .add("buckets", static_cast<int64_t>(s.buckets.size()))
                              .add("backward_ms", backward_ms)
                              .add("communication_ms", s.communication_ms())
                              .add("hidden_ms", s.hidden_ms())
                              .add("overlap_fraction", s.overlap_fraction())
                              .add("exposed_ms", s.exposed_ms)
                              .str()
                              .c_str());
      continue;
    }
    std::printf("DDP step %lld, rank %d of %d (%s)\n", static_cast<long long>(step), rank,
                trace.ranks, trace.path.c_str());
    std::fputs(events_table(trace, events, origin).str().c_str(), stdout);
    Table buckets({"bucket", "elements", "launched ms", "all-reduce ms", "hidden ms"}, {});
    for (const DdpBucket& b : s.buckets) {
      buckets.add({std::to_string(b.index), std::to_string(b.elements), fixed(b.launch_ms - origin, 3),
                   fixed(b.communication_ms, 3), fixed(b.hidden_ms, 3)});
    }
    std::fputs(buckets.str().c_str(), stdout);
    std::printf("backward %.3f ms over %d layers; %zu buckets: all-reduce %.3f ms, %.3f ms of it "
                "hidden behind backward (overlap %.1f%%); %.3f ms waited after backward\n\n",
                backward_ms, s.layers(), s.buckets.size(), s.communication_ms(), s.hidden_ms(),
                100 * s.overlap_fraction(), s.exposed_ms);
  }
  if (!t.plot.empty()) {
    const DdpStep s = ddp_step(trace, rank, steps.back());
    char title[200];
    std::snprintf(title, sizeof(title), "DDP step %lld: %zu buckets, all-reduce %.3f ms, %.0f%% hidden behind backward (rank %d)",
                  static_cast<long long>(steps.back()), s.buckets.size(), s.communication_ms(),
                  100 * s.overlap_fraction(), rank);
    write_step_plot(trace, steps.back(), t.plot, title);
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
