// The pipeline grid as an SVG picture, written directly (a grid of rectangles needs no plotting
// tool): stages down, time across, one box per computation as long as it lasts, F, B and W in
// three colours, labelled with the micro-batch (and chunk), idle time left white:
//
//   stage 0  [F0][F1][F2][F3]            [ B0 ][ B1 ][ B2 ][ B3 ]
//   stage 1      [F0][F1][F2][F3]  [ B0 ][ B1 ][ B2 ][ B3 ]
//
// Several schedules stack, one panel each, on a shared time axis.
#pragma once

#include <string>
#include <vector>

#include "tools/explain/pipeline_timeline.h"

namespace tessera {
namespace explain {

// `s` with <, > and & as XML entities.
std::string xml_escaped(const std::string& s);

// One schedule's grid. peak_in_flight[s]: stage s's peak micro-batches in flight, written at the
// end of its row.
struct GridPanel {
  std::vector<TimedCell> cells;
  int stages = 0;
  bool show_chunk = false;
  std::string title;
  std::vector<int> peak_in_flight;
};

// The panels stacked top to bottom, each under its title, all on one clock (the longest
// makespan sets the width), so schedules compare by length at a glance.
std::string pipeline_svg(const std::vector<GridPanel>& panels);

}  // namespace explain
}  // namespace tessera
