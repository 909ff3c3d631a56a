#include "data/data_loader.h"

namespace tessera {
namespace data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options,
                       Transform transform, std::shared_ptr<const Sampler> sampler)
    : dataset_(std::move(dataset)),
      options_(options),
      transform_(std::move(transform)),
      sampler_(std::move(sampler)) {
  TS_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  TS_CHECK(options.batch_size() > 0, "DataLoader: batch_size must be positive, got ",
           options.batch_size());
  TS_CHECK(options.prefetch() >= 0, "DataLoader: prefetch must be >= 0, got ", options.prefetch());
  if (!sampler_) {
    if (options.shuffle()) {
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options.seed());
    } else {
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
    }
  }
}

int64_t DataLoader::num_batches() const {
  const int64_t n = sampler_->size(), b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

Batch DataLoader::make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const {
  const int64_t begin = b * options_.batch_size();
  const int64_t end = std::min<int64_t>(begin + options_.batch_size(), order.size());
  Batch batch = dataset_->get_batch(std::vector<int64_t>(order.begin() + begin, order.begin() + end));
  if (transform_) {
    Generator gen((options_.seed() * 1000003ull + static_cast<uint64_t>(epoch)) * 1000003ull +
                  static_cast<uint64_t>(b));
    batch = transform_(std::move(batch), gen);
  }
  if (options_.pin_memory()) {
    batch.inputs = batch.inputs.pin_memory();
    batch.targets = batch.targets.pin_memory();
  }
  return batch;
}

Batch DataLoader::batch(int64_t e, int64_t b) const {
  TS_CHECK(b >= 0 && b < num_batches(), "DataLoader::batch: batch ", b, " of epoch ", e, ", but an "
           "epoch has ", num_batches(), " batches");
  std::lock_guard<std::mutex> lock(orders_->mutex);
  if (orders_->epoch != e) {
    orders_->order = sampler_->indices(e);
    orders_->epoch = e;
  }
  return make_batch(orders_->order, e, b);
}

DataLoader::Epoch::Epoch(const DataLoader& loader, int64_t epoch)
    : loader_(loader), epoch_(epoch), order_(loader.sampler_->indices(epoch)),
      num_batches_(loader.num_batches()) {
  if (loader.options_.prefetch() > 0 && num_batches_ > 0) {
    worker_ = std::thread([this] { produce(); });
  }
}

DataLoader::Epoch::~Epoch() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }
}

void DataLoader::Epoch::produce() {
  const size_t depth = static_cast<size_t>(loader_.options_.prefetch());
  for (int64_t b = 0; b < num_batches_; ++b) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || ready_.size() < depth; });
      if (stop_) return;
    }
    try {
      Batch batch = loader_.make_batch(order_, epoch_, b);
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.push_back(std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      done_ = true;
      changed_.notify_all();
      return;
    }
    changed_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  changed_.notify_all();
}

std::optional<Batch> DataLoader::Epoch::next() {
  if (!worker_.joinable()) {
    if (next_batch_ >= num_batches_) return std::nullopt;
    return loader_.make_batch(order_, epoch_, next_batch_++);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || done_; });
  if (!ready_.empty()) {
    Batch batch = std::move(ready_.front());
    ready_.pop_front();
    ++consumed_;
    lock.unlock();
    changed_.notify_all();
    return batch;
  }
  if (error_) {
    std::exception_ptr error = error_;
    error_ = nullptr;  // raised once
    std::rethrow_exception(error);
  }
  return std::nullopt;
}

}  // namespace data
}  // namespace tessera
