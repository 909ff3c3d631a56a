#include "dist/async/batch_queue.h"

#include "tensor/check.h"

namespace tessera {
namespace dist {

SharedBatchQueue::SharedBatchQueue(int64_t batches_per_epoch, int workers)
    : batches_(batches_per_epoch), told_end_(workers > 0 ? workers : 0, false),
      taken_(workers > 0 ? workers : 0, 0) {
  TS_CHECK(batches_per_epoch >= 1, "shared batch queue: ", batches_per_epoch,
           " batches per epoch (needs at least 1)");
  TS_CHECK(workers >= 1, "shared batch queue: ", workers, " workers (needs at least 1)");
}

bool SharedBatchQueue::epoch_over() const {
  return epoch_ < 0 || ended_ == static_cast<int>(told_end_.size());
}

void SharedBatchQueue::restore_batches_per_worker(const std::vector<int64_t>& taken) {
  TS_CHECK(epoch_over(), "shared batch queue: restoring the batches per worker while epoch ",
           epoch_, " runs (", handed_out_, " of ", batches_, " batches handed out)");
  TS_CHECK(taken.size() == taken_.size(), "shared batch queue: ", taken.size(),
           " batch counts for ", taken_.size(), " workers");
  for (size_t w = 0; w < taken.size(); ++w) {
    TS_CHECK(taken[w] >= 0, "shared batch queue: worker ", w, " took ", taken[w], " batches");
  }
  taken_ = taken;
}

int64_t SharedBatchQueue::next(int worker, int64_t epoch) {
  const int workers = static_cast<int>(told_end_.size());
  TS_CHECK(worker >= 0 && worker < workers, "shared batch queue: worker ", worker, " of ", workers);
  if (epoch != epoch_) {
    TS_CHECK(epoch > epoch_ && epoch_over(), "shared batch queue: worker ", worker,
             " asks for a batch of epoch ", epoch, " while epoch ", epoch_, " runs (",
             handed_out_, " of ", batches_, " batches handed out, ", ended_, " of ", workers,
             " workers done): the ranks disagree on the epoch");
    epoch_ = epoch;
    handed_out_ = 0;
    ended_ = 0;
    told_end_.assign(told_end_.size(), false);
  }
  TS_CHECK(!told_end_[worker], "shared batch queue: worker ", worker,
           " asks again after it was told epoch ", epoch_, " ended");
  if (handed_out_ < batches_) {
    ++taken_[worker];
    return handed_out_++;
  }
  told_end_[worker] = true;
  ++ended_;
  return kEpochEnd;
}

}  // namespace dist
}  // namespace tessera
