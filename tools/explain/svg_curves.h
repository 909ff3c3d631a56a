// Training curves as an SVG picture written directly, for machines without gnuplot (explain
// curves --plot uses gnuplot where it is installed): panels in two columns, each with its
// axes (five labelled ticks each way; a log2 axis for the loss scale), one polyline per run in
// the run's colour, the legend on top:
//
//   [ ] f32.jsonl  [ ] fp16.jsonl
//   +-- loss ------------+  +-- test accuracy ----+
//   | \__                |  |         ___/        |
//   |    \_____          |  |    ___/             |
//   +--------------------+  +---------------------+
#pragma once

#include <string>
#include <vector>

#include "tools/explain/metrics_runs.h"

namespace tessera {
namespace explain {

struct CurvePanel {
  std::string title;
  bool log2_y = false;
  std::vector<std::vector<CurvePoint>> lines;  // one per run, in the legend's order
};

// Every panel shares the x axis from 0 to the largest x of any line.
std::string curves_svg(const std::vector<CurvePanel>& panels, const std::vector<std::string>& runs,
                       const std::string& x_label, const std::string& title);

}  // namespace explain
}  // namespace tessera
