// SharedBatchQueue: the epoch's batches handed out one at a time to whichever worker asks next,
// instead of a fixed shard per worker (the "shared queue of batches" of asynchronous training:
// a fast worker takes more of the epoch, a straggler fewer, and the epoch ends when the last
// batch is done, not when the slowest worker has finished a quarter of the data).
//
//   epoch e, T batches (the loader's over the whole training set; every worker draws the same
//   order from the same seed, so only the batch's number travels):
//
//     worker 0 asks -> 0     worker 2 asks -> 1     worker 0 asks -> 2    ...   -> T-1
//     then each worker's next ask -> kEpochEnd (once per worker): it goes to evaluation
//
// Server 0 keeps the queue and answers with each pull (layout.h: the pull request carries the
// epoch; the batch number comes back with kAssignmentTag before the parameters). Every batch
// of the epoch is handed out exactly once; the numbers go out in order 0, 1, 2, ... so the
// epoch's images are those of a single-process epoch of the same loader.
//
// No MPI here: the rule alone, tested on its own.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace dist {

class SharedBatchQueue {
 public:
  static constexpr int64_t kEpochEnd = -1;

  // T >= 1 batches per epoch, W >= 1 workers; throws naming the values otherwise.
  SharedBatchQueue(int64_t batches_per_epoch, int workers);

  // Worker w asks for the next batch of `epoch`: its number in 0..T-1, or kEpochEnd once all
  // of the epoch's batches are handed out. The first ask of a later epoch starts it, which
  // needs every worker told the current one ended. Throws, naming the values, when a worker
  // asks for another epoch than the one running (the ranks disagree on the epoch) or asks
  // again after it was told the epoch ended.
  int64_t next(int worker, int64_t epoch);

  // Every worker has been told the running epoch ended (true before the first epoch).
  bool epoch_over() const;
  int64_t epoch() const { return epoch_; }  // -1 before the first ask
  int64_t batches_per_epoch() const { return batches_; }
  // Batches handed to each worker, over the whole run.
  const std::vector<int64_t>& batches_per_worker() const { return taken_; }
  // Resuming between epochs (a checkpoint is taken when an epoch is over, and the queue's
  // position then is a fresh queue's: the next ask starts the next epoch): the batches each
  // worker had taken. Throws, naming the values, mid-epoch or on a count per worker missing or
  // below 0.
  void restore_batches_per_worker(const std::vector<int64_t>& taken);

 private:
  int64_t batches_;
  int64_t epoch_ = -1, handed_out_ = 0;
  int ended_ = 0;
  std::vector<bool> told_end_;
  std::vector<int64_t> taken_;
};

}  // namespace dist
}  // namespace tessera
