#include "dist/zero/offload/swapped_vector.h"

#include <algorithm>
#include <utility>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace offload {

SwappedVector::SwappedVector(int64_t numel, DType dtype, Device device, const Offload& options,
                             const char* who)
    : numel_(numel), dtype_(dtype), device_(device), piece_numel_(options.piece_numel()) {
  store_ = make_store(options, options.optimizer(), who, "master_shard", device_.is_cuda());
  reserve();
  store_->commit();
}

SwappedVector::SwappedVector(int64_t numel, DType dtype, Device device, int64_t piece_numel,
                             std::shared_ptr<OffloadStore> store)
    : numel_(numel), dtype_(dtype), device_(device), piece_numel_(piece_numel),
      store_(std::move(store)) {
  TS_CHECK(store_ != nullptr, "SwappedVector: the store is null");
  TS_CHECK(piece_numel_ > 0 && piece_numel_ % 1024 == 0, "SwappedVector: piece_numel must be a "
           "positive multiple of 1024, got ", piece_numel_);
  reserve();
}

void SwappedVector::reserve() {
  const int64_t element = static_cast<int64_t>(element_size(dtype_));
  for (int64_t at = 0; at < numel_; at += piece_numel_) {
    segments_.push_back(store_->reserve(std::min(piece_numel_, numel_ - at) * element));
  }
}

// One staging buffer for the whole vector: its pieces are read into (written from) their places
// in it, all requests in flight at once, so the I/O threads overlap them.
SwappedVector::Transfer SwappedVector::post_read() const {
  const int64_t element = static_cast<int64_t>(element_size(dtype_));
  Transfer t;
  t.whole_ = StagingBuffer(numel_ * element + kBlockBytes * static_cast<int64_t>(segments_.size()),
                           device_.is_cuda());
  t.values_ = t.whole_.view(dtype_, numel_);
  // The pieces are whole blocks (piece_numel is a multiple of 1024 elements), so piece k starts
  // at a block boundary of the buffer: read it in place.
  for (size_t k = 0; k < segments_.size(); ++k) {
    t.requests_.push_back(store_->read(segments_[k], t.whole_.at(static_cast<int64_t>(k) * piece_numel_ * element)));
  }
  t.device_ = device_;
  return t;
}

SwappedVector::Transfer SwappedVector::post_write(const Tensor& values) const {
  TS_CHECK(values.numel() == numel_, "SwappedVector::write: ", values.numel(), " values for ",
           numel_, " elements");
  const int64_t element = static_cast<int64_t>(element_size(dtype_));
  Transfer t;
  t.whole_ = StagingBuffer(numel_ * element + kBlockBytes * static_cast<int64_t>(segments_.size()),
                           device_.is_cuda());
  t.whole_.view(dtype_, numel_).copy_(values.reshape({-1}));
  for (size_t k = 0; k < segments_.size(); ++k) {
    t.requests_.push_back(store_->write(segments_[k], t.whole_.at(static_cast<int64_t>(k) * piece_numel_ * element)));
  }
  return t;
}

void SwappedVector::Transfer::wait() {
  for (const IoRequest& r : requests_) r.wait();
  requests_.clear();
  whole_ = StagingBuffer();
}

Tensor SwappedVector::Transfer::take() {
  wait();
  Tensor out = values_;
  values_ = Tensor();
  return device_.is_cuda() ? out.to(device_) : out;
}

Tensor SwappedVector::read() const { return post_read().take(); }

void SwappedVector::write(const Tensor& values) const { post_write(values).wait(); }

}  // namespace offload
}  // namespace dist
}  // namespace tessera
