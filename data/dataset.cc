#include "data/dataset.h"

#include <cstring>

#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace data {

namespace {
Tensor index_tensor(const std::vector<int64_t>& indices) {
  return from_vector<int64_t>(indices, {static_cast<int64_t>(indices.size())});
}
}  // namespace

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  TS_CHECK(inputs_.defined() && targets_.defined() && inputs_.dim() >= 1 && targets_.dim() >= 1,
           "TensorDataset: inputs and targets need at least one dimension");
  TS_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: ", inputs_.size(0),
           " inputs but ", targets_.size(0), " targets");
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const Tensor idx = index_tensor(indices);
  return {index_select(inputs_, 0, idx), index_select(targets_, 0, idx)};
}

SyntheticImages::SyntheticImages(int64_t n, int64_t channels, int64_t height, int64_t width,
                                 int64_t classes, uint64_t seed)
    : n_(n), c_(channels), h_(height), w_(width), classes_(classes), seed_(seed) {
  TS_CHECK(n > 0 && channels > 0 && height > 0 && width > 0 && classes > 1,
           "SyntheticImages: sizes must be positive and classes > 1, got n = ", n, ", [", channels,
           ", ", height, ", ", width, "], classes = ", classes);
}

Batch SyntheticImages::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t b = static_cast<int64_t>(indices.size());
  Tensor images = empty({b, c_, h_, w_});
  Tensor labels = empty({b}, kI64);
  for (int64_t k = 0; k < b; ++k) {
    const int64_t i = indices[k];
    TS_CHECK(i >= 0 && i < n_, "SyntheticImages: index ", i, " out of range [0, ", n_, ")");
    // Each example has its own stream: (seed, index) -> the same image every time.
    Generator gen(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i));
    const int64_t label = static_cast<int64_t>(philox4x32(gen.seed(), ~0ull)[0] % classes_);
    labels.data<int64_t>()[k] = label;
    Tensor image = images.select(0, k);
    normal_(image, static_cast<double>(label) / classes_ - 0.5, 1.0, &gen);
  }
  return {images, labels};
}

}  // namespace data
}  // namespace tessera
