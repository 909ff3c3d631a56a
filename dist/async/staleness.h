// StalenessStats: how stale the gradients a parameter server applied were. For each update:
//
//   updates between   the updates the server applied between the worker's pull and its push
//                     (tau: 0 means the gradient was taken at the server's current parameters)
//   lag               how many iterations the worker was ahead of the slowest one when its pull
//                     was answered (SSP keeps it <= B)
//
// with the mean, the maximum and a histogram of tau (histogram[t] = updates with tau = t).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

class StalenessStats {
 public:
  void record(int64_t updates_between, int64_t lag);

  int64_t count() const { return count_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }
  int64_t max() const { return max_; }
  int64_t max_lag() const { return max_lag_; }
  double mean_lag() const { return count_ ? static_cast<double>(lag_sum_) / count_ : 0.0; }
  const std::vector<int64_t>& histogram() const { return histogram_; }

  // Collective over `group`: the statistics of every rank's updates together (ranks that
  // recorded none, workers, contribute nothing). Every rank gets the result.
  StalenessStats sum_over(ProcessGroup& group) const;

 private:
  int64_t count_ = 0, sum_ = 0, max_ = 0, lag_sum_ = 0, max_lag_ = 0;
  std::vector<int64_t> histogram_;
};

}  // namespace dist
}  // namespace tessera
