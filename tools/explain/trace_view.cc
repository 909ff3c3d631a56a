#include "tools/explain/trace_view.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "tensor/check.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/svg_timeline.h"

namespace tessera {
namespace explain {

TracedSteps read_traced_steps(Flags& flags, const std::string& command) {
  TracedSteps t;
  const std::string path = flags.required("trace");
  t.rank = static_cast<int>(flags.integer("rank", 0, 0));
  const int64_t step = flags.integer("step", 0, 1);
  t.json = flags.boolean("json");
  t.plot = flags.text("plot", "");
  flags.check_all_used(command);
  if (!t.plot.empty()) check_plot_path(t.plot);
  t.trace = read_trace(path);
  check_rank(t.trace, t.rank);
  t.steps = select_steps(t.trace, step);
  return t;
}

std::vector<const TraceEvent*> step_events(const Trace& trace, int rank, int64_t step) {
  std::vector<const TraceEvent*> out;
  for (const TraceEvent& e : trace.events) {
    if (e.rank == rank && e.step == step && e.category != "step") out.push_back(&e);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceEvent* a, const TraceEvent* b) { return a->start_ms < b->start_ms; });
  return out;
}

Table events_table(const Trace& trace, const std::vector<const TraceEvent*>& events, double origin_ms) {
  Table table({"start ms", "ms", "track", "event"}, {2, 3});
  for (const TraceEvent* e : events) {
    table.add({fixed(e->start_ms - origin_ms, 3), e->end_ms > e->start_ms ? fixed(e->ms(), 3) : "-",
               trace.track_name(e->rank, e->track), e->name});
  }
  return table;
}

void print_event_lines(const Trace& trace, const std::vector<const TraceEvent*>& events,
                       double origin_ms) {
  for (const TraceEvent* e : events) {
    json::Object line(kJsonLine);
    line.add("step", e->step)
        .add("rank", e->rank)
        .add("track", trace.track_name(e->rank, e->track))
        .add("event", e->name)
        .add("kind", e->category)
        .add("start_ms", e->start_ms - origin_ms)
        .add("ms", e->ms());
    if (e->bucket >= 0) line.add("bucket", e->bucket);
    if (e->elements > 0) line.add("elements", e->elements);
    if (!e->unit.empty()) line.add("unit", e->unit);
    if (!e->layer.empty()) line.add("layer", e->layer);
    std::printf("%s\n", line.str().c_str());
  }
}

std::string step_timeline_svg(const Trace& trace, int64_t step, const std::string& title) {
  std::map<std::pair<int, int>, int> lane_of;  // (rank, track) -> lane, ranks then tracks
  for (const TraceEvent& e : trace.events) {
    if (e.step == step && e.category != "step") lane_of[{e.rank, e.track}] = 0;
  }
  std::vector<std::string> lanes;
  for (auto& [key, lane] : lane_of) {
    lane = static_cast<int>(lanes.size());
    lanes.push_back("rank " + std::to_string(key.first) + " " + trace.track_name(key.first, key.second));
  }
  std::vector<TimelineBox> boxes;
  for (const TraceEvent& e : trace.events) {
    if (e.step != step || e.category == "step") continue;
    boxes.push_back({lane_of[{e.rank, e.track}], e.start_ms, e.end_ms, e.name, e.category});
  }
  // Longest first: a span nested in another (a pull inside train_step) is drawn over it.
  std::stable_sort(boxes.begin(), boxes.end(), [](const TimelineBox& a, const TimelineBox& b) {
    return a.end_ms - a.start_ms > b.end_ms - b.start_ms;
  });
  return timeline_svg(lanes, boxes, title);
}

void write_step_plot(const Trace& trace, int64_t step, const std::string& path, const std::string& title) {
  std::ofstream out(path);
  TS_CHECK(out.good(), "--plot=", path, ": cannot write the file");
  out << step_timeline_svg(trace, step, title);
  TS_CHECK(out.good(), "--plot=", path, ": writing failed");
  std::fprintf(stderr, "explain: wrote %s\n", path.c_str());
}

}  // namespace explain
}  // namespace tessera
