// SSPClock: the stale-synchronous parallel rule (Ho et al. 2013, "More Effective Distributed
// ML via a Stale Synchronous Parallel Parameter Server"), as a parameter server keeps it.
//
// Each worker's clock is the number of gradients it has pushed. A worker may start iteration c
// (its pull is answered) only when the slowest worker has pushed at least c - B:
//
//   B = 2, W = 3       clocks:  w0 = 5   w1 = 3   w2 = 4      slowest = 3
//   w0 asks to start c = 5:  5 - 2 = 3 <= 3   yes
//   w0 asks to start c = 6:  6 - 2 = 4 >  3   waits until w1 pushes
//
// So no worker is ever more than B iterations ahead of the slowest. Measured in updates, a
// push then follows at most (W - 1)(2B + 1) other workers' pushes since its pull: each of the
// others is at least at c - B when the pull is answered and at most at c + B + 1 by the push
// (max_updates_between). B = 0 is synchronous SGD; unbounded (kUnbounded) never waits. A
// finished worker holds nobody back.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace dist {

class SSPClock {
 public:
  // bound: B >= 0, or AsyncOptions::kUnbounded (-1). Throws naming the values.
  SSPClock(int workers, int64_t bound);

  // Worker w pushed a gradient (its clock advances) / has no more to push.
  void pushed(int worker);
  void finished(int worker);
  // Resuming from a checkpoint: every worker running again, worker w at clocks[w] pushes.
  // Throws, naming the values, unless there is one clock >= 0 per worker.
  void restore(const std::vector<int64_t>& clocks);

  int64_t clock(int worker) const { return clocks_[worker]; }
  bool is_finished(int worker) const { return finished_[worker]; }
  bool all_finished() const;
  // The clock of the slowest worker still running (INT64_MAX when every worker has finished).
  int64_t slowest() const;
  // Whether a worker may start iteration `clock` now.
  bool may_start(int64_t clock) const;
  // How many iterations `clock` is ahead of the slowest running worker (0 if none runs).
  int64_t lag(int64_t clock) const;
  // The most updates from other workers that can fall between a pull and its push under this
  // bound: (W - 1)(2B + 1); -1 when unbounded.
  int64_t max_updates_between() const;
  int64_t bound() const { return bound_; }
  int workers() const { return static_cast<int>(clocks_.size()); }

 private:
  void check_worker(int worker, const char* what) const;
  std::vector<int64_t> clocks_;
  std::vector<bool> finished_;
  int64_t bound_;
};

}  // namespace dist
}  // namespace tessera
