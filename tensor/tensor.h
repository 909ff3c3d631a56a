// Tensor: an n-dimensional view of typed elements in a Storage.
//
// A Tensor is a cheap handle: copying one copies a shared_ptr and the small shape/stride
// vectors, never the elements. Views (view/reshape, narrow/slice, select, transpose/permute,
// expand, squeeze/unsqueeze) build new handles over the same Storage with other sizes, strides
// and offset, so writing through a view writes the base. contiguous() copies only when the
// elements are not already densely packed in row-major order. Math lives in tensor/ops.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace tessera {

// What a factory makes: dtype and device, with chained setters. A bare DType converts to it.
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}  // NOLINT: implicit by design
  TensorOptions(Device device) : device_(device) {}  // NOLINT
  TensorOptions& dtype(DType d) { dtype_ = d; return *this; }
  TensorOptions& device(Device d) { device_ = d; return *this; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

 private:
  DType dtype_ = kF32;
  Device device_ = Device::cpu();
};

// How a 4-D [N, C, H, W] tensor lays out its elements (PyTorch's torch.memory_format):
// kContiguous is row-major NCHW; kChannelsLast stores each pixel's channels together (NHWC:
// strides [H*W*C, 1, W*C, C]), the layout oneDNN's bf16 convolutions read and write without a
// reorder. Either is an ordinary strided tensor: every op accepts both, and the ones with
// channels-last kernels (convolution, batch norm, max pooling, elementwise) keep it.
//
// kChannelsBlocked is oneDNN's nChw16c, the layout its f32 convolution kernels compute in on
// CPUs with AVX-512: channels in blocks of 16, a pixel's 16 channels of a block side by side,
// [N][C/16][H][W][16] (C a multiple of 16). Keeping activations so between layers saves the
// reorders into it and back around every convolution. No strides express it, so such a tensor
// has none: stride(), data() and the views other than reshape/flatten throw, naming the layout;
// ops with kernels for it (convolution, batch norm, max pooling, elementwise) keep it, the others
// take it converted (contiguous()). channel_blocks() sees it, as any 4-D tensor whose channels
// fill blocks of 16, as the strided [N, C/16, H, W, 16]: how kernels and copies reach it.
enum class MemoryFormat { kContiguous, kChannelsLast, kChannelsBlocked };

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  Tensor(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset,
         DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return sizes_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const;  // throws for a channels-blocked tensor (it has none)
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  size_t element_size() const { return tessera::element_size(dtype_); }
  size_t nbytes() const { return numel_ * element_size(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  TensorOptions options() const { return TensorOptions(dtype_).device(device()); }

  bool is_contiguous() const;
  // 4-D with NHWC strides (size-1 dims ignored, as is_contiguous does). A tensor can be both.
  bool is_channels_last() const;
  // Laid out as kChannelsBlocked (nChw16c); such a tensor is neither of the two above.
  bool is_channels_blocked() const { return blocked_; }
  bool is_contiguous(MemoryFormat format) const {
    switch (format) {
      case MemoryFormat::kChannelsLast: return is_channels_last();
      case MemoryFormat::kChannelsBlocked: return is_channels_blocked();
      case MemoryFormat::kContiguous: break;
    }
    return is_contiguous();
  }
  // The same elements as the strided 5-D [N, C/16, H, W, 16] (element [n][b][h][w][l] is
  // channel 16b + l): a view of this 4-D tensor, whose channels must fill blocks of 16. For a
  // channels-blocked tensor it is its memory in order (contiguous).
  Tensor channel_blocks() const;
  // True when both handles look at the same elements of the same storage.
  bool is_same(const Tensor& other) const;

  // Address of element [0, ..., 0] (channels-blocked: throws; channel_blocks().raw_data()).
  void* raw_data() const;
  template <typename T>
  T* data() const {
    TS_CHECK(DTypeOf<T>::value == dtype_, "Tensor::data: tensor holds ", dtype_, ", asked for ",
             DTypeOf<T>::value);
    return static_cast<T*>(raw_data());
  }

  // ---- views (share storage) ----
  Tensor view(Shape shape) const;     // error if the strides cannot express it
  Tensor reshape(Shape shape) const;  // a view when possible, else a contiguous copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const Shape& dims) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a dim; new leading dims allowed
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- copies ----
  Tensor contiguous() const;
  // *this when already laid out so, else a copy that is (kChannelsLast needs 4 dims,
  // kChannelsBlocked 4 dims with a multiple of 16 channels on the CPU).
  Tensor contiguous(MemoryFormat format) const;
  Tensor clone() const;  // always a fresh contiguous copy
  Tensor to(DType dtype) const;    // returns *this when already that dtype
  Tensor to(Device device) const;  // returns *this when already there
  Tensor to(const TensorOptions& options) const;
  Tensor cpu() const { return to(Device::cpu()); }
  // A copy in page-locked host memory (CUDA builds), so copies to the GPU run asynchronously.
  Tensor pin_memory() const;
  bool is_pinned() const;

  // ---- in place ----
  // Copies src (broadcast to this shape, converted to this dtype, from any device) into this.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // ---- element access (tests, printing; copies to the CPU when needed) ----
  double item() const;  // the only element
  double at(const Shape& index) const;
  template <typename T>
  std::vector<T> to_vector() const;
  std::string str() const;  // "Tensor[f32, cpu, [2, 3]]"

 private:
  friend Tensor empty(const Shape& shape, const TensorOptions& options, MemoryFormat format);
  // Views need strides: a channels-blocked tensor has none.
  void check_strided(const char* op) const;

  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Shape strides_;  // channels-blocked: unused (NCHW's, never read)
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  DType dtype_ = kF32;
  bool blocked_ = false;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- factories ----
Tensor empty(const Shape& shape, const TensorOptions& options = {});
Tensor empty(const Shape& shape, const TensorOptions& options, MemoryFormat format);
// A tensor of this shape and dtype whose values are elsewhere: it holds no bytes, and reading it
// is an error saying `why` (ZeRO-3's parameters between their unit's uses).
Tensor absent(const Shape& shape, const TensorOptions& options, std::string why);
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
Tensor scalar_tensor(double value, const TensorOptions& options = {});  // 0-dim
// [start, end) by step, like Python's range; dtype i64 unless options say otherwise.
Tensor arange(double start, double end, double step = 1, const TensorOptions& options = kI64);
Tensor arange(int64_t end, const TensorOptions& options = kI64);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
// Copies `values` into a new tensor of dtype DTypeOf<T> (then converted to options.dtype()).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  return from_vector<T>(values, shape).to(options);
}

}  // namespace tessera
