#include "pipeline/schedule_grid.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace tessera {
namespace pipeline {

std::string draw_grid(const ValidationReport& report) {
  const bool chunks = report.chunks > 1;
  size_t width = 2;
  for (const StageReport& r : report.stage) {
    for (const TimedAction& t : r.timeline) width = std::max(width, to_string(t.action, chunks).size());
  }
  width += 2;
  auto cell = [&](const std::string& s) { return s + std::string(width - s.size(), ' '); };
  std::ostringstream os;
  std::string header = "slot      ";
  for (long t = 0; t < report.makespan; ++t) header += cell(std::to_string(t));
  while (!header.empty() && header.back() == ' ') header.pop_back();
  os << header << "\n";
  for (int s = 0; s < report.stages; ++s) {
    std::vector<std::string> row(report.makespan, ".");
    for (const TimedAction& t : report.stage[s].timeline) row[t.start] = to_string(t.action, chunks);
    std::string line = "stage " + std::to_string(s) + std::string(s < 10 ? 3 : 2, ' ');
    for (const std::string& c : row) line += cell(c);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
  os << report.str() << "\n";
  return os.str();
}

std::string explain(ScheduleKind kind, int stages, int microbatches, int chunks) {
  const ValidationReport report = validate(make_schedules(kind, stages, microbatches, chunks),
                                          microbatches, chunks, transport_for(kind));
  std::ostringstream os;
  os << schedule_name(kind) << "  K=" << stages << " M=" << microbatches;
  if (kind == ScheduleKind::kInterleaved) os << " v=" << chunks;
  os << "\n" << draw_grid(report);
  return os.str();
}

std::string explain_timing(ScheduleKind kind, int stages, int microbatches, int chunks,
                           const StageTimes& times) {
  const auto lists = make_schedules(kind, stages, microbatches, chunks);
  const TimedStep step = play_timed(lists, chunks, std::vector<StageTimes>(stages, times));
  const double busy = step.makespan - step.bubble();
  std::ostringstream os;
  os << "timing model, equal stages: F " << times.forward << ", backward " << times.backward;
  if (splits_backward(lists[0])) {
    os << " = B " << times.backward - times.weight << " + W " << times.weight;
  }
  char line[200];
  std::snprintf(line, sizeof(line),
                "\n  step %.3f, bubble %.3f (%.3f of the step); without a flush %.3f (%.3f)\n",
                step.makespan, step.bubble(), step.bottleneck_idle(), step.bubble_without_flush(),
                step.bubble_without_flush() / (busy + step.bubble_without_flush()));
  os << line;
  if (kind == ScheduleKind::kZBH1) {
    std::snprintf(line, sizeof(line), "  ZB-H1 closed form (K-1)(T_F + T_B - T_W) = %.3f\n",
                  zb_h1_bubble(stages, times));
    os << line;
  }
  return os.str();
}

}  // namespace pipeline
}  // namespace tessera
