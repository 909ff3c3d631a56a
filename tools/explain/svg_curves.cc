#include "tools/explain/svg_curves.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tools/explain/svg_grid.h"

namespace tessera {
namespace explain {
namespace {

constexpr double kPanelWidth = 440, kPanelHeight = 240, kLeft = 70, kTop = 70, kGapX = 90,
                 kGapY = 80;
const char* const kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                "#b07aa1", "#76b7b2", "#9c755f", "#bab0ac"};

std::string number(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

}  // namespace

std::string curves_svg(const std::vector<CurvePanel>& panels, const std::vector<std::string>& runs,
                       const std::string& x_label, const std::string& title) {
  double x_max = 0;
  for (const CurvePanel& p : panels) {
    for (const auto& line : p.lines) {
      for (const CurvePoint& c : line) x_max = std::max(x_max, c.x);
    }
  }
  if (x_max <= 0) x_max = 1;
  const int rows = static_cast<int>((panels.size() + 1) / 2);
  const double width = kLeft + 2 * (kPanelWidth + kGapX), height = kTop + rows * (kPanelHeight + kGapY);
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"14\">" << xml_escaped(title) << "</text>\n";
  double legend_x = kLeft;
  for (size_t r = 0; r < runs.size(); ++r) {
    os << "<rect x=\"" << legend_x << "\" y=\"32\" width=\"14\" height=\"4\" fill=\""
       << kColours[r % 8] << "\"/><text x=\"" << legend_x + 18 << "\" y=\"38\">"
       << xml_escaped(runs[r]) << "</text>\n";
    legend_x += 40 + 6.5 * runs[r].size();
  }
  for (size_t i = 0; i < panels.size(); ++i) {
    const CurvePanel& p = panels[i];
    const double left = kLeft + (i % 2) * (kPanelWidth + kGapX);
    const double top = kTop + (i / 2) * (kPanelHeight + kGapY);
    auto y_of = [&](double y) { return p.log2_y ? std::log2(std::max(y, 1e-300)) : y; };
    double y_min = INFINITY, y_max = -INFINITY;
    for (const auto& line : p.lines) {
      for (const CurvePoint& c : line) {
        y_min = std::min(y_min, y_of(c.y));
        y_max = std::max(y_max, y_of(c.y));
      }
    }
    if (!(y_min <= y_max)) y_min = 0, y_max = 1;
    if (y_max - y_min < 1e-12) y_min -= 1, y_max += 1;  // a constant: mid-panel
    const double x_scale = kPanelWidth / x_max, y_scale = kPanelHeight / (y_max - y_min);
    auto px = [&](double x) { return left + x * x_scale; };
    auto py = [&](double y) { return top + kPanelHeight - (y_of(y) - y_min) * y_scale; };
    os << "<text x=\"" << left + kPanelWidth / 2 << "\" y=\"" << top - 8
       << "\" text-anchor=\"middle\" font-size=\"12\">" << xml_escaped(p.title) << "</text>\n"
       << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << kPanelWidth << "\" height=\""
       << kPanelHeight << "\" fill=\"none\" stroke=\"black\"/>\n";
    for (int t = 0; t <= 4; ++t) {  // five ticks each way, labelled with their values
      const double yv = y_min + (y_max - y_min) * t / 4, y = top + kPanelHeight - (yv - y_min) * y_scale;
      os << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + kPanelWidth << "\" y2=\""
         << y << "\" stroke=\"#e5e5e5\"/><text x=\"" << left - 6 << "\" y=\"" << y + 4
         << "\" text-anchor=\"end\">" << number(p.log2_y ? std::exp2(yv) : yv) << "</text>\n";
      const double xv = x_max * t / 4;
      os << "<text x=\"" << px(xv) << "\" y=\"" << top + kPanelHeight + 16
         << "\" text-anchor=\"middle\">" << number(xv) << "</text>\n";
    }
    os << "<text x=\"" << left + kPanelWidth / 2 << "\" y=\"" << top + kPanelHeight + 34
       << "\" text-anchor=\"middle\">" << xml_escaped(x_label) << "</text>\n";
    for (size_t r = 0; r < p.lines.size(); ++r) {
      os << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" << kColours[r % 8]
         << "\" points=\"";
      for (const CurvePoint& c : p.lines[r]) os << px(c.x) << "," << py(c.y) << " ";
      os << "\"><title>" << xml_escaped(r < runs.size() ? runs[r] : "") << "</title></polyline>\n";
    }
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace explain
}  // namespace tessera
