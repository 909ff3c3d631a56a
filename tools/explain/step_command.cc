// explain step: any strategy's traced step (train --trace=FILE): every event of a rank in order,
// per kind of event its count and time, how much of the communication threads' time ran while
// the compute thread was busy, and (--plot) every rank's lanes. The lecture's pictures of
// tensor parallelism, pipelines, local SGD, gossip and parameter servers come from this view;
// explain ddp and explain zero3 add their strategies' own figures (buckets, units).
#include <algorithm>
#include <cstdio>
#include <map>

#include "tools/explain/commands.h"
#include "tools/explain/json_line.h"
#include "tools/explain/trace_view.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain step --trace=FILE [--rank=R] [--step=S] [--json] [--plot=FILE.svg]\n"
    "A real training step of any strategy from a trace (train --strategy=... --trace=FILE):\n"
    "the rank's events in order, then per kind of event (forward, backward, all_reduce, send,\n"
    "wait, ...) how many and how long, and how much communication-thread time ran while the\n"
    "compute thread was busy other than waiting (hidden) or not.\n"
    "  --trace=FILE     the Chrome trace the train tool wrote\n"
    "  --rank=R         the rank to show (default 0)\n"
    "  --step=S         the step to show (default: every step in the trace)\n"
    "  --json           one JSON object per line: each event (step, rank, track, event, kind,\n"
    "                   start_ms, ms, ...), then per step and kind (summary: kind, events, ms),\n"
    "                   then per step (summary: step, compute_ms, communication_ms, hidden_ms)\n"
    "  --plot=FILE.svg  the (last) step shown, every rank's compute and communication lanes\n";

// [start, end) intervals merged, for the time a track was busy.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

double length(const std::vector<std::pair<double, double>>& spans) {
  double total = 0;
  for (const auto& s : spans) total += s.second - s.first;
  return total;
}

// The part of `a` that lies inside `b` (both merged).
double overlap(const std::vector<std::pair<double, double>>& a, const std::vector<std::pair<double, double>>& b) {
  double total = 0;
  for (const auto& x : a) {
    for (const auto& y : b) total += std::max(0.0, std::min(x.second, y.second) - std::max(x.first, y.first));
  }
  return total;
}

}  // namespace

int step_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const TracedSteps t = read_traced_steps(flags, "step");
  for (int64_t step : t.steps) {
    const std::vector<const TraceEvent*> events = step_events(t.trace, t.rank, step);
    TS_CHECK(!events.empty(), "step ", step, " of rank ", t.rank, " in ", t.trace.path,
             " has no events but the step itself (was the strategy's library traced?)");
    const double origin = events.front()->start_ms;
    std::map<std::string, std::pair<int64_t, double>> kinds;  // kind -> (events, ms)
    std::vector<std::pair<double, double>> compute, communication;
    for (const TraceEvent* e : events) {
      auto& k = kinds[e->category];
      ++k.first;
      k.second += e->ms();
      // Waiting on the compute thread is not computing: only what runs there otherwise hides
      // communication.
      if (e->ms() <= 0 || (e->track == 0 && e->category == "wait")) continue;
      (e->track == 0 ? compute : communication).push_back({e->start_ms, e->end_ms});
    }
    compute = merged(compute);
    communication = merged(communication);
    const double hidden = overlap(communication, compute);
    if (t.json) {
      print_event_lines(t.trace, events, origin);
      for (const auto& [kind, k] : kinds) {
        std::printf("%s\n", json::Object(kJsonLine)
                                .add("summary", "kind")
                                .add("step", step)
                                .add("rank", t.rank)
                                .add("kind", kind)
                                .add("events", k.first)
                                .add("ms", k.second)
                                .str()
                                .c_str());
      }
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("summary", "step")
                              .add("step", step)
                              .add("rank", t.rank)
                              .add("compute_ms", length(compute))
                              .add("communication_ms", length(communication))
                              .add("hidden_ms", hidden)
                              .str()
                              .c_str());
      continue;
    }
    std::printf("step %lld, rank %d of %d (%s)\n", static_cast<long long>(step), t.rank,
                t.trace.ranks, t.trace.path.c_str());
    std::fputs(events_table(t.trace, events, origin).str().c_str(), stdout);
    Table table({"kind", "events", "ms"}, {});
    for (const auto& [kind, k] : kinds) table.add({kind, std::to_string(k.first), fixed(k.second, 3)});
    std::fputs(table.str().c_str(), stdout);
    std::printf("compute thread busy %.3f ms (its waits left out); communication threads busy "
                "%.3f ms, %.3f ms of it while the compute thread was busy too\n\n",
                length(compute), length(communication), hidden);
  }
  if (!t.plot.empty()) {
    char title[200];
    const std::string file = t.trace.path.substr(t.trace.path.find_last_of('/') + 1);
    std::snprintf(title, sizeof(title), "Step %lld of %s, every rank's lanes",
                  static_cast<long long>(t.steps.back()), file.c_str());
    write_step_plot(t.trace, t.steps.back(), t.plot, title);
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
