#include "tools/explain/svg_timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "tools/explain/svg_grid.h"

namespace tessera {
namespace explain {
namespace {

constexpr double kWidth = 1000, kRow = 34, kTop = 44, kGap = 6;
constexpr double kCharWidth = 5.6;  // about one character of the 10-point sans-serif labels

const char* colour(const std::string& kind) {
  if (kind == "forward") return "#4e79a7";
  if (kind == "backward") return "#59a14f";
  if (kind == "all_reduce") return "#f28e2b";
  if (kind == "all_gather") return "#76b7b2";
  if (kind == "reduce_scatter") return "#e15759";
  if (kind == "free") return "#b07aa1";
  if (kind == "wait") return "#bab0ac";
  return "#9c755f";
}

}  // namespace

std::string timeline_svg(const std::vector<std::string>& lanes, const std::vector<TimelineBox>& boxes,
                         const std::string& title) {
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  for (const TimelineBox& b : boxes) {
    t0 = std::min(t0, b.start_ms);
    t1 = std::max(t1, b.end_ms);
  }
  if (boxes.empty()) t0 = t1 = 0;
  // The lane labels' column, as wide as the longest label (at least 130 pixels).
  size_t longest = 0;
  for (const std::string& lane : lanes) longest = std::max(longest, lane.size());
  const double left = std::max(130.0, 16 + kCharWidth * static_cast<double>(longest));
  const double span = std::max(t1 - t0, 1e-3), scale = kWidth / span;  // pixels per ms
  auto x_of = [&](double ms) { return left + (ms - t0) * scale; };
  const double height = kTop + lanes.size() * kRow + 64;
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + kWidth + 20 << "\" height=\""
     << height << "\" font-family=\"sans-serif\" font-size=\"10\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << left << "\" y=\"20\" font-size=\"13\">" << xml_escaped(title) << "</text>\n";
  for (size_t l = 0; l < lanes.size(); ++l) {
    const double y = kTop + l * kRow;
    os << "<text x=\"8\" y=\"" << y + kRow / 2 + 2 << "\">" << xml_escaped(lanes[l]) << "</text>\n"
       << "<line x1=\"" << left << "\" y1=\"" << y + kRow - kGap / 2 << "\" x2=\"" << left + kWidth
       << "\" y2=\"" << y + kRow - kGap / 2 << "\" stroke=\"#dddddd\"/>\n";
  }
  for (const TimelineBox& b : boxes) {
    const double x = x_of(b.start_ms), y = kTop + b.lane * kRow;
    if (b.end_ms == b.start_ms) {  // an instant: a tick across the lane
      os << "<line x1=\"" << x << "\" y1=\"" << y - 2 << "\" x2=\"" << x << "\" y2=\""
         << y + kRow - kGap << "\" stroke=\"" << colour(b.kind) << "\" stroke-width=\"2\"><title>"
         << xml_escaped(b.label) << "</title></line>\n";
      continue;
    }
    const double w = std::max(1.0, (b.end_ms - b.start_ms) * scale);
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\""
       << kRow - kGap << "\" rx=\"2\" fill=\"" << colour(b.kind) << "\" stroke=\"white\"><title>"
       << xml_escaped(b.label) << "</title></rect>\n";
    if (w > 6.0 * b.label.size()) {  // the label where it fits
      os << "<text x=\"" << x + w / 2 << "\" y=\"" << y + kRow / 2 + 1
         << "\" fill=\"white\" text-anchor=\"middle\">" << xml_escaped(b.label) << "</text>\n";
    }
  }
  // Time axis in milliseconds from the first event, about ten ticks.
  const double axis = kTop + lanes.size() * kRow + 4;
  os << "<line x1=\"" << left << "\" y1=\"" << axis << "\" x2=\"" << left + kWidth << "\" y2=\""
     << axis << "\" stroke=\"black\"/>\n";
  const double raw = span / 10, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double tick = raw / magnitude < 2 ? magnitude : raw / magnitude < 5 ? 2 * magnitude : 5 * magnitude;
  for (double t = 0; t <= span + 1e-9; t += tick) {
    std::ostringstream label;
    label << t;
    os << "<text x=\"" << left + t * scale << "\" y=\"" << axis + 14
       << "\" text-anchor=\"middle\">" << label.str() << "</text>\n";
  }
  os << "<text x=\"" << left + kWidth / 2 << "\" y=\"" << axis + 30
     << "\" text-anchor=\"middle\">milliseconds from the step's first event</text>\n";
  // Legend: the kinds drawn, in order of first appearance (an instant's as a tick).
  std::vector<std::string> kinds;
  for (const TimelineBox& b : boxes) {
    if (std::find(kinds.begin(), kinds.end(), b.kind) == kinds.end()) kinds.push_back(b.kind);
  }
  double x = left;
  for (const std::string& kind : kinds) {
    os << "<rect x=\"" << x << "\" y=\"" << axis + 40 << "\" width=\"10\" height=\"10\" fill=\""
       << colour(kind) << "\"/><text x=\"" << x + 14 << "\" y=\"" << axis + 49 << "\">"
       << xml_escaped(kind) << "</text>\n";
    x += 24 + 6.5 * kind.size();
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace explain
}  // namespace tessera
