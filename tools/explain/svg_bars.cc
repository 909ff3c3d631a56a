#include "tools/explain/svg_bars.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tensor/check.h"
#include "tools/explain/svg_grid.h"

namespace tessera {
namespace explain {

namespace {

constexpr double kLeft = 80, kTop = 50, kPlotHeight = 260, kBarWidth = 58, kGroupGap = 30,
                 kLegendWidth = 170, kBottom = 60;
const char* const kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"};

}  // namespace

std::string bars_svg(const BarChart& c) {
  TS_CHECK(!c.groups.empty() && !c.series.empty(), "bars_svg: no groups or no series");
  TS_CHECK(c.values.size() == c.series.size() && c.labels.size() == c.series.size(), "bars_svg: ",
           c.series.size(), " series but ", c.values.size(), " rows of values and ", c.labels.size(),
           " of labels");
  double top = 0, bottom = INFINITY;
  for (size_t s = 0; s < c.series.size(); ++s) {
    TS_CHECK(c.values[s].size() == c.groups.size() && c.labels[s].size() == c.groups.size(),
             "bars_svg: series ", c.series[s], " has ", c.values[s].size(), " values for ",
             c.groups.size(), " groups");
    for (double v : c.values[s]) {
      if (v < 0 || (c.log_y && v <= 0)) continue;
      top = std::max(top, v);
      bottom = std::min(bottom, v);
    }
  }
  // The axis: 0 to the tallest bar (+10% for its label), or whole decades around the values.
  double lo = 0, hi = top > 0 ? top * 1.1 : 1;
  if (c.log_y) {
    lo = std::floor(std::log10(bottom == INFINITY ? 1 : bottom));
    hi = std::max(lo + 1, std::ceil(std::log10(top > 0 ? top : 10) + 0.15));
  }
  const auto height_of = [&](double v) {
    const double f = c.log_y ? (std::log10(v) - lo) / (hi - lo) : v / hi;
    return kPlotHeight * std::clamp(f, 0.0, 1.0);
  };
  // A group as wide as the bars it has (a strategy without some collective leaves no gap).
  const auto drawn = [&](size_t s, size_t g) { return c.values[s][g] >= 0 && !(c.log_y && c.values[s][g] <= 0); };
  std::vector<double> group_x;
  double plot_width = kGroupGap;
  for (size_t g = 0; g < c.groups.size(); ++g) {
    group_x.push_back(kLeft + plot_width);
    size_t bars = 0;
    for (size_t s = 0; s < c.series.size(); ++s) bars += drawn(s, g);
    plot_width += std::max<size_t>(bars, 1) * kBarWidth + kGroupGap;
  }
  // Group labels wider than their group (about 6.5 pixels a character) are turned 30 degrees,
  // the plot taller by what they need, so that none is cut off or overlaps its neighbour.
  bool turn = false;
  size_t longest = 0;
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const double room = (g + 1 < group_x.size() ? group_x[g + 1] : kLeft + plot_width) - group_x[g];
    turn = turn || 6.5 * c.groups[g].size() > room;
    longest = std::max(longest, c.groups[g].size());
  }
  const double label_depth = turn ? 6.5 * longest * 0.5 + 10 : 0;
  const double width = std::max(kLeft + plot_width + kLegendWidth, kLeft + 7.5 * c.title.size() + 20);
  const double height = kTop + kPlotHeight + kBottom + label_depth;
  const double base = kTop + kPlotHeight;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"13\">" << xml_escaped(c.title) << "</text>\n"
     << "<text transform=\"translate(18," << kTop + kPlotHeight / 2 << ") rotate(-90)\" "
     << "text-anchor=\"middle\">" << xml_escaped(c.y_label) << "</text>\n";
  // Axis ticks: five on a linear axis, one per decade on a log axis.
  const int ticks = c.log_y ? static_cast<int>(hi - lo) : 5;
  for (int t = 0; t <= ticks; ++t) {
    const double v = c.log_y ? std::pow(10.0, lo + t) : hi * t / ticks;
    const double y = base - (c.log_y ? kPlotHeight * t / ticks : height_of(v));
    std::ostringstream label;
    label.precision(3);
    label << v;
    os << "<line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + plot_width << "\" y2=\""
       << y << "\" stroke=\"#e4e4e4\"/>\n"
       << "<text x=\"" << kLeft - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << label.str()
       << "</text>\n";
  }
  for (size_t g = 0; g < c.groups.size(); ++g) {
    double x = group_x[g];
    for (size_t s = 0; s < c.series.size(); ++s) {
      if (!drawn(s, g)) continue;
      const double h = height_of(c.values[s][g]);
      os << "<rect x=\"" << x + 2 << "\" y=\"" << base - h << "\" width=\"" << kBarWidth - 4
         << "\" height=\"" << h << "\" fill=\"" << kColours[s % 6] << "\"/>\n"
         << "<text x=\"" << x + kBarWidth / 2 << "\" y=\"" << base - h - 4
         << "\" text-anchor=\"middle\" font-size=\"9\">" << xml_escaped(c.labels[s][g]) << "</text>\n";
      x += kBarWidth;
    }
    const double centre = (group_x[g] + std::max(x, group_x[g] + kBarWidth)) / 2;
    if (turn) {
      os << "<text transform=\"translate(" << centre + 4 << "," << base + 14 << ") rotate(-30)\" "
         << "text-anchor=\"end\">" << xml_escaped(c.groups[g]) << "</text>\n";
    } else {
      os << "<text x=\"" << centre << "\" y=\"" << base + 16 << "\" text-anchor=\"middle\">"
         << xml_escaped(c.groups[g]) << "</text>\n";
    }
  }
  os << "<line x1=\"" << kLeft << "\" y1=\"" << base << "\" x2=\"" << kLeft + plot_width << "\" y2=\""
     << base << "\" stroke=\"black\"/>\n"
     << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << base
     << "\" stroke=\"black\"/>\n";
  const double legend_x = kLeft + plot_width + 20;
  for (size_t s = 0; s < c.series.size(); ++s) {
    const double y = kTop + 10 + 18 * s;
    os << "<rect x=\"" << legend_x << "\" y=\"" << y - 9 << "\" width=\"12\" height=\"12\" fill=\""
       << kColours[s % 6] << "\"/><text x=\"" << legend_x + 18 << "\" y=\"" << y + 1 << "\">"
       << xml_escaped(c.series[s]) << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace explain
}  // namespace tessera
