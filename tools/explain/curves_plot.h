// explain curves --plot: one SVG, a panel per quantity (loss, test accuracy, loss scale on a log
// axis, images/s) in a grid of two columns, each run a line of its own colour in every panel, all
// on one axis of steps or seconds. gnuplot draws it (gnuplot.h; the data inline as datablocks);
// without gnuplot svg_curves.h writes the same panels directly:
//
//   +---------- loss ----------+------ test accuracy -----+
//   | run A \__                |            __.-- run A   |
//   | run B    \____           |      __.--'  __.- run B  |
//   +------ loss scale --------+-------- images/s --------+
#pragma once

#include <string>
#include <vector>

#include "tools/explain/metrics_runs.h"

namespace tessera {
namespace explain {

void plot_curves(const std::vector<MetricsRun>& runs, const std::vector<Quantity>& quantities,
                 bool by_time, const std::string& path);

}  // namespace explain
}  // namespace tessera
