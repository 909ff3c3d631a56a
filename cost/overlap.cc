#include "cost/overlap.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace cost {

void OverlapTimeline::compute(double seconds) {
  TS_CHECK(seconds >= 0, "OverlapTimeline::compute: negative time ", seconds);
  compute_clock_ += seconds;
  computing_ += seconds;
}

int OverlapTimeline::launch(double seconds) {
  TS_CHECK(seconds >= 0, "OverlapTimeline::launch: negative time ", seconds);
  comm_clock_ = std::max(comm_clock_, compute_clock_) + seconds;
  communicating_ += seconds;
  ends_.push_back(comm_clock_);
  return static_cast<int>(ends_.size()) - 1;
}

void OverlapTimeline::wait(int id) { compute_clock_ = std::max(compute_clock_, end(id)); }

void OverlapTimeline::wait_all() {
  if (!ends_.empty()) compute_clock_ = std::max(compute_clock_, comm_clock_);
}

}  // namespace cost
}  // namespace tessera
