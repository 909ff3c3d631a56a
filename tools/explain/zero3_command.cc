// explain zero3: one real ZeRO-3 (FSDP) step from a trace (train --strategy=zero3 --trace=FILE):
// each unit's all-gather, forward, free, re-gather, backward, free and reduce-scatter in the
// order they happened (zero3_flow.h), and per unit how many of each and how long. --json prints
// one line per event, one per unit and a summary line per step; --plot draws the step's lanes
// for every rank.
#include <cstdio>

#include "tools/explain/commands.h"
#include "tools/explain/json_line.h"
#include "tools/explain/trace_view.h"
#include "tools/explain/zero3_flow.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain zero3 --trace=FILE [--rank=R] [--step=S] [--json] [--plot=FILE.svg]\n"
    "A real ZeRO-3 (FSDP) step from a trace (train --strategy=zero3 --trace=FILE): each unit's\n"
    "all-gather, computation, free and reduce-scatter in order, and per unit their counts and times.\n"
    "  --trace=FILE     the Chrome trace the train tool wrote\n"
    "  --rank=R         the rank to show (default 0)\n"
    "  --step=S         the step to show (default: every step in the trace)\n"
    "  --json           one JSON object per line: each unit event (step, rank, track, event, kind,\n"
    "                   start_ms, ms, unit, elements), one per unit (all_gathers, frees,\n"
    "                   reduce_scatters and their ms), then a summary per step\n"
    "  --plot=FILE.svg  the (last) step shown, every rank's compute and communication lanes\n";

}  // namespace

int zero3_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const TracedSteps t = read_traced_steps(flags, "zero3");
  const Trace& trace = t.trace;
  const int rank = t.rank;
  const std::vector<int64_t>& steps = t.steps;
  for (int64_t step : steps) {
    const Zero3Step s = zero3_step(trace, rank, step);
    int gathers = 0, frees = 0, reduce_scatters = 0;
    double gather_ms = 0, reduce_scatter_ms = 0;
    for (const Zero3Unit& u : s.units) {
      gathers += u.gathers;
      frees += u.frees;
      reduce_scatters += u.reduce_scatters;
      gather_ms += u.gather_ms;
      reduce_scatter_ms += u.reduce_scatter_ms;
    }
    if (t.json) {
      print_event_lines(trace, s.flow, s.step_start_ms);
      for (const Zero3Unit& u : s.units) {
        std::printf("%s\n", json::Object(kJsonLine)
                                .add("step", step)
                                .add("rank", rank)
                                .add("unit", u.name)
                                .add("elements", u.elements)
                                .add("all_gathers", u.gathers)
                                .add("frees", u.frees)
                                .add("reduce_scatters", u.reduce_scatters)
                                .add("all_gather_ms", u.gather_ms)
                                .add("reduce_scatter_ms", u.reduce_scatter_ms)
                                .add("forward_ms", u.forward_ms)
                                .add("backward_ms", u.backward_ms)
                                .str()
                                .c_str());
      }
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("summary", "zero3")
                              .add("step", step)
                              .add("rank", rank)
                              .add("units", static_cast<int64_t>(s.units.size()))
                              .add("all_gathers", gathers)
                              .add("frees", frees)
                              .add("reduce_scatters", reduce_scatters)
                              .add("all_gather_ms", gather_ms)
                              .add("reduce_scatter_ms", reduce_scatter_ms)
                              .str()
                              .c_str());
      continue;
    }
    std::printf("ZeRO-3 step %lld, rank %d of %d (%s)\n", static_cast<long long>(step), rank,
                trace.ranks, trace.path.c_str());
    std::fputs(events_table(trace, s.flow, s.step_start_ms).str().c_str(), stdout);
    Table units({"unit", "elements", "all-gathers", "frees", "reduce-scatters", "all-gather ms",
                 "reduce-scatter ms", "forward ms", "backward ms"});
    for (const Zero3Unit& u : s.units) {
      units.add({u.name, std::to_string(u.elements), std::to_string(u.gathers), std::to_string(u.frees),
                 std::to_string(u.reduce_scatters), fixed(u.gather_ms, 3), fixed(u.reduce_scatter_ms, 3),
                 fixed(u.forward_ms, 3), fixed(u.backward_ms, 3)});
    }
    std::fputs(units.str().c_str(), stdout);
    std::printf("%zu units: %d all-gathers (%.3f ms), %d frees, %d reduce-scatters (%.3f ms)\n\n",
                s.units.size(), gathers, gather_ms, frees, reduce_scatters, reduce_scatter_ms);
  }
  if (!t.plot.empty()) {
    char title[200];
    std::snprintf(title, sizeof(title), "ZeRO-3 step %lld: each unit gathered, computed, freed, reduce-scattered",
                  static_cast<long long>(steps.back()));
    write_step_plot(trace, steps.back(), t.plot, title);
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
