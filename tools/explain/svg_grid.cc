#include "tools/explain/svg_grid.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tessera {
namespace explain {

namespace {

constexpr double kUnit = 32;  // pixels per forward time
constexpr double kRow = 30, kLeft = 70, kTop = 40, kGap = 4;

const char* colour(pipeline::ActionKind kind) {
  switch (kind) {
    case pipeline::ActionKind::kForward: return "#4e79a7";
    case pipeline::ActionKind::kBackward: return "#59a14f";
    default: return "#f28e2b";  // W
  }
}

}  // namespace

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

namespace {

// One panel whose title's baseline is at `top`; returns the height it took.
double write_panel(std::ostringstream& os, const GridPanel& p, double top, double makespan) {
  os << "<text x=\"" << kLeft << "\" y=\"" << top << "\" font-size=\"13\">" << xml_escaped(p.title)
     << "</text>\n";
  const double rows = top + kTop - 20;
  for (int s = 0; s < p.stages; ++s) {
    const double y = rows + s * kRow;
    os << "<text x=\"8\" y=\"" << y + kRow / 2 + 4 << "\">stage " << s << "</text>\n"
       << "<line x1=\"" << kLeft << "\" y1=\"" << y + kRow - kGap / 2 << "\" x2=\""
       << kLeft + makespan * kUnit << "\" y2=\"" << y + kRow - kGap / 2
       << "\" stroke=\"#dddddd\"/>\n";
    if (s < static_cast<int>(p.peak_in_flight.size())) {
      os << "<text x=\"" << kLeft + makespan * kUnit + 8 << "\" y=\"" << y + kRow / 2 + 4
         << "\">in flight " << p.peak_in_flight[s] << "</text>\n";
    }
  }
  for (const TimedCell& c : p.cells) {
    const double x = kLeft + c.start * kUnit, y = rows + c.stage * kRow;
    const double w = c.duration * kUnit;
    os << "<rect x=\"" << x + 1 << "\" y=\"" << y << "\" width=\"" << std::max(1.0, w - 2)
       << "\" height=\"" << kRow - kGap << "\" rx=\"3\" fill=\"" << colour(c.action.kind) << "\"/>\n"
       << "<text x=\"" << x + w / 2 << "\" y=\"" << y + kRow / 2 + 2
       << "\" fill=\"white\" text-anchor=\"middle\">"
       << xml_escaped(pipeline::to_string(c.action, p.show_chunk)) << "</text>\n";
  }
  return kTop - 20 + p.stages * kRow + 24;
}

}  // namespace

std::string pipeline_svg(const std::vector<GridPanel>& panels) {
  double makespan = 0, rows_height = 0;
  for (const GridPanel& p : panels) {
    for (const TimedCell& c : p.cells) makespan = std::max(makespan, c.start + c.duration);
    rows_height += kTop - 20 + p.stages * kRow + 24;
  }
  const double width = kLeft + makespan * kUnit + 110, height = 20 + rows_height + 40;
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  double top = 20;
  for (const GridPanel& p : panels) top += write_panel(os, p, top, makespan);
  // Time axis: a tick per forward time.
  const double axis = top - 20;
  os << "<line x1=\"" << kLeft << "\" y1=\"" << axis << "\" x2=\"" << kLeft + makespan * kUnit
     << "\" y2=\"" << axis << "\" stroke=\"black\"/>\n";
  const int step = makespan > 60 ? 10 : makespan > 20 ? 5 : 1;
  for (int t = 0; t <= static_cast<int>(std::floor(makespan)); t += step) {
    os << "<text x=\"" << kLeft + t * kUnit << "\" y=\"" << axis + 14 << "\" text-anchor=\"middle\">" << t
       << "</text>\n";
  }
  os << "<text x=\"" << kLeft + makespan * kUnit / 2 << "\" y=\"" << axis + 30
     << "\" text-anchor=\"middle\">time (one forward = 1)</text>\n</svg>\n";
  return os.str();
}

}  // namespace explain
}  // namespace tessera
