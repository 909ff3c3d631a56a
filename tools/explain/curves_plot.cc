#include "tools/explain/curves_plot.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "tensor/check.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/svg_curves.h"

namespace tessera {
namespace explain {

namespace {

// A run's name in a legend: its --label, or its file name, without quotes gnuplot would end a
// string at.
std::string legend(const MetricsRun& run) {
  std::string name = run.label.empty() ? run.path.substr(run.path.find_last_of('/') + 1) : run.label;
  for (char& c : name) {
    if (c == '\'' || c == '"') c = '_';
  }
  return name;
}

std::string datablock(const std::string& name, const std::vector<CurvePoint>& points) {
  std::string out = "$" + name + " << EOD\n";
  char row[64];
  for (const CurvePoint& p : points) {
    std::snprintf(row, sizeof row, "%.9g %.9g\n", p.x, p.y);
    out += row;
  }
  return out + "EOD\n";
}

// A log2 axis from half the smallest scale to twice the largest: a scale that never changed
// (the common case) sits mid-panel instead of on an empty range.
std::string loss_scale_axis(const std::vector<MetricsRun>& runs, bool by_time) {
  double low = 0, high = 0;
  for (const MetricsRun& r : runs) {
    for (const CurvePoint& p : r.curve(Quantity::kLossScale, by_time)) {
      low = low == 0 ? p.y : std::min(low, p.y);
      high = std::max(high, p.y);
    }
  }
  char text[96];
  std::snprintf(text, sizeof text, "set logscale y 2\nset yrange [%.9g:%.9g]\n", low / 2, high * 2);
  return text;
}

// Without gnuplot: the same panels written as SVG directly (svg_curves.h).
void write_svg(const std::vector<MetricsRun>& runs, const std::vector<Quantity>& quantities,
               bool by_time, const std::string& path, const std::string& title) {
  std::vector<CurvePanel> panels;
  for (Quantity q : quantities) {
    CurvePanel panel{quantity_label(q), q == Quantity::kLossScale, {}};
    for (const MetricsRun& r : runs) panel.lines.push_back(r.curve(q, by_time));
    panels.push_back(panel);
  }
  std::vector<std::string> names;
  for (const MetricsRun& r : runs) names.push_back(legend(r));
  std::ofstream out(path);
  out << curves_svg(panels, names, by_time ? "seconds since training began" : "step", title);
  TS_CHECK(out.good(), "--plot=", path, ": cannot write the file");
  std::fprintf(stderr, "explain: wrote %s (gnuplot is not installed: written directly)\n", path.c_str());
}

}  // namespace

void plot_curves(const std::vector<MetricsRun>& runs, const std::vector<Quantity>& quantities,
                 bool by_time, const std::string& path) {
  TS_CHECK(!quantities.empty(), "--plot=", path, ": no quantity every run has to draw");
  std::string title = "training curves:";
  for (const MetricsRun& r : runs) title += " " + legend(r);
  if (!gnuplot_available()) return write_svg(runs, quantities, by_time, path, title);
  const int columns = quantities.size() > 1 ? 2 : 1;
  const int rows = static_cast<int>((quantities.size() + 1) / 2);
  std::string script = gnuplot_preamble(path, 1000, 360 * rows, title);
  for (size_t q = 0; q < quantities.size(); ++q) {
    for (size_t r = 0; r < runs.size(); ++r) {
      script += datablock("q" + std::to_string(q) + "r" + std::to_string(r),
                          runs[r].curve(quantities[q], by_time));
    }
  }
  script += "set multiplot layout " + std::to_string(rows) + "," + std::to_string(columns) +
            " title \"" + title + "\" noenhanced\n";
  script += std::string("set xlabel '") + (by_time ? "seconds since training began" : "step") + "'\n";
  // Every panel on the same horizontal axis: from 0 to the last point of any run.
  double last = 0;
  for (Quantity quantity : quantities) {
    for (const MetricsRun& r : runs) {
      for (const CurvePoint& p : r.curve(quantity, by_time)) last = std::max(last, p.x);
    }
  }
  char range[64];
  std::snprintf(range, sizeof range, "set xrange [0:%.9g]\n", last);
  script += range;
  script += "set key below\n";
  for (size_t q = 0; q < quantities.size(); ++q) {
    const Quantity quantity = quantities[q];
    script += std::string("set title '") + quantity_label(quantity) + "'\n";
    script += std::string("set ylabel '") + quantity_label(quantity) + "'\n";
    script += quantity == Quantity::kLossScale ? loss_scale_axis(runs, by_time) : "unset logscale y\nset yrange [*:*]\n";
    // Accuracy has a point per epoch: marked; the per-step curves are plain lines.
    const std::string style =
        quantity == Quantity::kAccuracy ? "linespoints pt 7 ps 0.6" : "lines";
    script += "plot ";
    for (size_t r = 0; r < runs.size(); ++r) {
      script += (r ? ", " : "") + std::string("$q") + std::to_string(q) + "r" + std::to_string(r) +
                " using 1:2 with " + style + " lw 1.5 lc " + std::to_string(r + 1) + " title '" +
                legend(runs[r]) + "'";
    }
    script += "\n";
  }
  script += "unset multiplot\n";
  run_gnuplot(script, path);
}

}  // namespace explain
}  // namespace tessera
