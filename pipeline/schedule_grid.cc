#include "pipeline/schedule_grid.h"

#include <algorithm>
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

}  // namespace pipeline
}  // namespace tessera
