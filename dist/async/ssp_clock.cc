#include "dist/async/ssp_clock.h"

#include <algorithm>
#include <climits>

#include "tensor/check.h"

namespace tessera {
namespace dist {

SSPClock::SSPClock(int workers, int64_t bound)
    : clocks_(workers, 0), finished_(workers, false), bound_(bound) {
  TS_CHECK(workers >= 1, "SSPClock: ", workers, " workers (need >= 1)");
  TS_CHECK(bound >= -1, "SSPClock: staleness bound ", bound, " (>= 0, or -1 for unbounded)");
}

void SSPClock::check_worker(int worker, const char* what) const {
  TS_CHECK(worker >= 0 && worker < workers(), "SSPClock::", what, ": worker ", worker,
           " out of range [0, ", workers(), ")");
  TS_CHECK(!finished_[worker], "SSPClock::", what, ": worker ", worker, " has finished");
}

void SSPClock::pushed(int worker) {
  check_worker(worker, "pushed");
  ++clocks_[worker];
}

void SSPClock::finished(int worker) {
  check_worker(worker, "finished");
  finished_[worker] = true;
}

void SSPClock::restore(const std::vector<int64_t>& clocks) {
  TS_CHECK(clocks.size() == clocks_.size(), "SSPClock::restore: ", clocks.size(),
           " clocks for ", workers(), " workers");
  for (size_t w = 0; w < clocks.size(); ++w) {
    TS_CHECK(clocks[w] >= 0, "SSPClock::restore: worker ", w, "'s clock is ", clocks[w],
             " (must be >= 0)");
  }
  clocks_ = clocks;
  finished_.assign(clocks_.size(), false);
}

bool SSPClock::all_finished() const {
  return std::all_of(finished_.begin(), finished_.end(), [](bool f) { return f; });
}

int64_t SSPClock::slowest() const {
  int64_t s = INT64_MAX;
  for (int w = 0; w < workers(); ++w) {
    if (!finished_[w]) s = std::min(s, clocks_[w]);
  }
  return s;
}

bool SSPClock::may_start(int64_t clock) const { return bound_ < 0 || clock - bound_ <= slowest(); }

int64_t SSPClock::lag(int64_t clock) const {
  const int64_t s = slowest();
  return s == INT64_MAX ? 0 : std::max<int64_t>(0, clock - s);
}

int64_t SSPClock::max_updates_between() const {
  return bound_ < 0 ? -1 : static_cast<int64_t>(workers() - 1) * (2 * bound_ + 1);
}

}  // namespace dist
}  // namespace tessera
