// Grouped bars as an SVG picture, written directly (for the run report: a page with no plotting
// tool behind it): a group per x label (a rank, a collective), a bar per series in the series'
// colour (measured, predicted), each bar's value written above it, the legend outside the plot
// on the right so that no bar hides under it; a log10 axis for values spanning decades (bytes of
// a scalar all-reduce beside a gradient reduce-scatter):
//
//        1.2 MB 1.2 MB
//        [####][::::]   [####][::::]      [####] measured
//        [####][::::]   [####][::::]      [::::] predicted
//         rank 0          rank 1
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace explain {

struct BarChart {
  std::string title, y_label;
  std::vector<std::string> groups;           // x labels
  std::vector<std::string> series;           // legend, one colour each
  std::vector<std::vector<double>> values;   // [series][group]; a missing bar: negative
  std::vector<std::vector<std::string>> labels;  // [series][group], written above each bar
  bool log_y = false;
};

// Throws when the values' shape does not match the groups and series.
std::string bars_svg(const BarChart& chart);

}  // namespace explain
}  // namespace tessera
