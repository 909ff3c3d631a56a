// The pipeline grid as an SVG picture, written directly (a grid of rectangles needs no plotting
// tool): stages down, time across, one box per computation as long as it lasts, F, B and W in
// three colours, labelled with the micro-batch (and chunk), idle time left white:
//
//   stage 0  [F0][F1][F2][F3]            [ B0 ][ B1 ][ B2 ][ B3 ]
//   stage 1      [F0][F1][F2][F3]  [ B0 ][ B1 ][ B2 ][ B3 ]
#pragma once

#include <string>
#include <vector>

#include "tools/explain/pipeline_timeline.h"

namespace tessera {
namespace explain {

// `s` with <, > and & as XML entities.
std::string xml_escaped(const std::string& s);

// peak_in_flight[s]: stage s's peak micro-batches in flight, written at the end of its row.
std::string pipeline_svg(const std::vector<TimedCell>& cells, int stages, bool show_chunk,
                         const std::string& title, const std::vector<int>& peak_in_flight);

}  // namespace explain
}  // namespace tessera
