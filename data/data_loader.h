// DataLoader: batches of a Dataset in a Sampler's order, made ahead on a worker thread.
//
//   DataLoader loader(dataset, DataLoaderOptions(128).shuffle(true).seed(1));
//   for (int64_t e = 0; e < epochs; ++e)
//     for (Batch& batch : loader.epoch(e)) { ... }
//
// Each epoch's order comes from the sampler (RandomSampler(seed) when shuffling); transforms
// draw from a generator seeded by (seed, epoch, batch index), so the batches of a run depend on
// the seed alone, not on thread timing. With prefetch > 0 a worker thread keeps up to that many
// batches ready; an exception on the worker is carried to the caller and re-raised by the next
// call that waits for a batch. Leaving an epoch early stops and joins the worker.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"

namespace tessera {
namespace data {

class DataLoaderOptions {
 public:
  explicit DataLoaderOptions(int64_t batch_size = 64) : batch_size_(batch_size) {}
  DataLoaderOptions& batch_size(int64_t b) { batch_size_ = b; return *this; }
  DataLoaderOptions& shuffle(bool s) { shuffle_ = s; return *this; }
  DataLoaderOptions& drop_last(bool d) { drop_last_ = d; return *this; }
  DataLoaderOptions& seed(uint64_t s) { seed_ = s; return *this; }
  DataLoaderOptions& prefetch(int p) { prefetch_ = p; return *this; }
  // Batches come in pinned host memory (made on the worker thread), so their copies to a GPU
  // run asynchronously. Needs a CUDA build.
  DataLoaderOptions& pin_memory(bool p) { pin_memory_ = p; return *this; }
  bool pin_memory() const { return pin_memory_; }
  int64_t batch_size() const { return batch_size_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  uint64_t seed() const { return seed_; }
  int prefetch() const { return prefetch_; }

 private:
  int64_t batch_size_;
  bool shuffle_ = false, drop_last_ = false;
  uint64_t seed_ = 0;
  int prefetch_ = 2;
  bool pin_memory_ = false;
};

class DataLoader {
 public:
  // sampler defaults to Sequential, or Random(seed) when options.shuffle().
  DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options,
             Transform transform = nullptr, std::shared_ptr<const Sampler> sampler = nullptr);
  // A sampler without a transform (a DistributedSampler's shard of the data as it is).
  template <typename S, typename = std::enable_if_t<std::is_base_of_v<Sampler, S>>>
  DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options,
             std::shared_ptr<S> sampler)
      : DataLoader(std::move(dataset), options, nullptr,
                   std::shared_ptr<const Sampler>(std::move(sampler))) {}

  int64_t num_batches() const;
  const DataLoaderOptions& options() const { return options_; }

  class Epoch;
  Epoch epoch(int64_t e) const;
  // Batch b (0 <= b < num_batches()) of epoch e, the same as the b-th of epoch(e), on its own:
  // for batches handed out one at a time (a shared queue). The epoch's order is kept for the
  // next call with the same e.
  Batch batch(int64_t e, int64_t b) const;

 private:
  friend class Epoch;
  Batch make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const;

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  Transform transform_;
  std::shared_ptr<const Sampler> sampler_;
  // batch(): the last epoch's order (shared by copies, which have the same sampler).
  struct OrderCache {
    std::mutex mutex;
    int64_t epoch = -1;
    std::vector<int64_t> order;
  };
  std::shared_ptr<OrderCache> orders_ = std::make_shared<OrderCache>();
};

// One pass over the data. Iterate with range-for, or call next() until it returns nothing.
class DataLoader::Epoch {
 public:
  Epoch(const DataLoader& loader, int64_t epoch);
  ~Epoch();
  Epoch(Epoch&&) = delete;
  Epoch(const Epoch&) = delete;

  std::optional<Batch> next();

  class Iterator {
   public:
    Iterator(Epoch* epoch, std::optional<Batch> current) : epoch_(epoch), current_(std::move(current)) {}
    Batch& operator*() { return *current_; }
    Iterator& operator++() {
      current_ = epoch_->next();
      return *this;
    }
    bool operator!=(const Iterator& other) const {
      return current_.has_value() != other.current_.has_value();
    }

   private:
    Epoch* epoch_;
    std::optional<Batch> current_;
  };
  Iterator begin() { return Iterator(this, next()); }
  Iterator end() { return Iterator(this, std::nullopt); }

 private:
  void produce();

  const DataLoader& loader_;
  int64_t epoch_;
  std::vector<int64_t> order_;
  int64_t num_batches_;
  int64_t next_batch_ = 0;  // synchronous mode

  // Worker state (prefetch > 0).
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  std::exception_ptr error_;
  bool done_ = false, stop_ = false;
  int64_t consumed_ = 0;
};

// An Epoch owns a thread and cannot move; epoch() returns it through guaranteed copy elision.
inline DataLoader::Epoch DataLoader::epoch(int64_t e) const { return Epoch(*this, e); }

}  // namespace data
}  // namespace tessera
