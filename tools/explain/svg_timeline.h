// A measured timeline as an SVG picture, written directly (boxes on lanes need no plotting
// tool): lanes down (a rank's compute thread, its communication thread), milliseconds across,
// one box per span coloured by its kind (forward, backward, all_reduce, all_gather,
// reduce_scatter, wait), an instant (a bucket's launch, a unit's free) as a tick:
//
//   rank 0 compute  [forward][bwd fc2][bwd fc1     ]|[wait    ]
//   rank 0 comm                        [all_reduce 0]  [all_reduce 1]
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace explain {

struct TimelineBox {
  int lane = 0;
  double start_ms = 0, end_ms = 0;  // equal: an instant, drawn as a tick
  std::string label, kind;
};

std::string timeline_svg(const std::vector<std::string>& lanes, const std::vector<TimelineBox>& boxes,
                         const std::string& title);

}  // namespace explain
}  // namespace tessera
