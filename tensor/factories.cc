// Tensor factories: fresh storage from the device's allocator, filled or not (tensor.h).
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "tensor/deferred_init.h"
#include "tensor/tensor.h"

namespace tessera {

Tensor empty(const Shape& shape, const TensorOptions& options) {
  for (int64_t s : shape) TS_CHECK(s >= 0, "empty: negative size in shape ", shape);
  const size_t nbytes = numel(shape) * element_size(options.dtype());
  auto storage = DeferredInit::active()
                     ? std::make_shared<Storage>(nbytes, options.device(), Storage::Deferred{})
                     : std::make_shared<Storage>(nbytes, options.device());
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, options.dtype());
}

Tensor absent(const Shape& shape, const TensorOptions& options, std::string why) {
  const size_t nbytes = numel(shape) * element_size(options.dtype());
  auto storage = std::make_shared<Storage>(nbytes, options.device(), Storage::Absent{std::move(why)});
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, options.dtype());
}

Tensor empty(const Shape& shape, const TensorOptions& options, MemoryFormat format) {
  if (format == MemoryFormat::kContiguous) return empty(shape, options);
  if (format == MemoryFormat::kChannelsBlocked) {
    TS_CHECK(shape.size() == 4 && shape[1] % 16 == 0 && options.device().is_cpu(),
             "empty: channels-blocked (nChw16c) needs a 4-D [N, C, H, W] shape with C a "
             "multiple of 16 on the CPU, got shape ", shape, " on ", options.device());
    Tensor t = empty(shape, options);  // numel elements: the blocks leave no padding
    t.blocked_ = true;
    return t;
  }
  TS_CHECK(shape.size() == 4, "empty: channels-last needs a 4-D [N, C, H, W] shape, got ", shape);
  // NHWC storage, seen as [N, C, H, W].
  return empty({shape[0], shape[2], shape[3], shape[1]}, options).permute({0, 3, 1, 2});
}

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  Tensor t = empty(shape, options);
  t.fill_(value);
  return t;
}

Tensor zeros(const Shape& shape, const TensorOptions& options) { return full(shape, 0, options); }
Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1, options); }
Tensor scalar_tensor(double value, const TensorOptions& options) { return full({}, value, options); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.options()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.options()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.options()); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  TS_CHECK(step != 0, "arange: step must be non-zero");
  TS_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start and end must be finite");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return from_vector<double>(values, {n}, options);
}

Tensor arange(int64_t end, const TensorOptions& options) { return arange(0, end, 1, options); }

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  TS_CHECK(static_cast<int64_t>(values.size()) == numel(shape), "from_vector: ", values.size(),
           " values do not fill shape ", shape, " (", numel(shape), " elements)");
  Tensor t = empty(shape, DTypeOf<T>::value);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&);

}  // namespace tessera
