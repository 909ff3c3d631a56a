#include "dist/async/staleness.h"

#include <algorithm>

#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

void StalenessStats::record(int64_t updates_between, int64_t lag) {
  TS_CHECK(updates_between >= 0 && lag >= 0, "StalenessStats: negative staleness (",
           updates_between, " updates, lag ", lag, ")");
  ++count_;
  sum_ += updates_between;
  lag_sum_ += lag;
  max_ = std::max(max_, updates_between);
  max_lag_ = std::max(max_lag_, lag);
  if (static_cast<int64_t>(histogram_.size()) <= updates_between) {
    histogram_.resize(updates_between + 1, 0);
  }
  ++histogram_[updates_between];
}

StalenessStats StalenessStats::sum_over(ProcessGroup& group) const {
  // Sums and maxima first (the histogram's length is the largest tau plus one).
  Tensor sums = from_vector<int64_t>({count_, sum_, lag_sum_}, {3});
  Tensor maxima = from_vector<int64_t>({max_, max_lag_, static_cast<int64_t>(histogram_.size())}, {3});
  group.all_reduce(sums, ReduceOp::kSum)->wait();
  group.all_reduce(maxima, ReduceOp::kMax)->wait();
  StalenessStats out;
  out.count_ = sums.data<int64_t>()[0];
  out.sum_ = sums.data<int64_t>()[1];
  out.lag_sum_ = sums.data<int64_t>()[2];
  out.max_ = maxima.data<int64_t>()[0];
  out.max_lag_ = maxima.data<int64_t>()[1];
  const int64_t bins = maxima.data<int64_t>()[2];
  if (bins > 0) {
    std::vector<int64_t> mine(histogram_);
    mine.resize(bins, 0);
    Tensor h = from_vector<int64_t>(mine, {bins});
    group.all_reduce(h, ReduceOp::kSum)->wait();
    out.histogram_.assign(h.data<int64_t>(), h.data<int64_t>() + bins);
  }
  return out;
}

}  // namespace dist
}  // namespace tessera
