#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "tensor/allocator.h"
#include "tensor/backend.h"

namespace tessera {

namespace {

// Strides that let a tensor with (sizes, strides) be seen with `shape` without copying, or
// nothing. Dims are matched chunk by chunk: a chunk is a run of dims that is contiguous within
// itself, and each chunk of the old shape must be covered exactly by dims of the new one.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  Shape new_strides(shape.size());
  if (numel(sizes) == 0) return contiguous_strides(shape);
  Shape old_sizes = sizes, old_strides = strides;
  if (old_sizes.empty()) {
    old_sizes = {1};
    old_strides = {1};
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    const bool chunk_ends =
        d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Replaces a single -1 by the size that keeps numel; checks the total.
Shape infer_shape(Shape shape, int64_t total, const char* op, const Shape& from) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TS_CHECK(infer < 0, op, ": only one dim may be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      TS_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in ", shape);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TS_CHECK(known != 0 && total % known == 0, op, ": shape ", shape,
             " is invalid for input of shape ", from, " (", total, " elements)");
    shape[infer] = total / known;
  } else {
    TS_CHECK(known == total, op, ": shape ", shape, " is invalid for input of shape ", from, " (",
             total, " elements)");
  }
  return shape;
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset,
               DType dtype)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(offset),
      numel_(tessera::numel(sizes_)),
      dtype_(dtype) {
  TS_INTERNAL_ASSERT(sizes_.size() == strides_.size());
}

int64_t Tensor::size(int64_t d) const { return sizes_[wrap_dim(d, dim(), "Tensor::size")]; }
int64_t Tensor::stride(int64_t d) const {
  check_strided("Tensor::stride");
  return strides_[wrap_dim(d, dim(), "Tensor::stride")];
}
const Shape& Tensor::strides() const {
  check_strided("Tensor::strides");
  return strides_;
}

void Tensor::check_strided(const char* op) const {
  TS_CHECK(!blocked_, op, ": the tensor of shape ", sizes_, " is channels-blocked (nChw16c, "
           "MemoryFormat::kChannelsBlocked), which no strides express; convert it first "
           "(contiguous()) or reach its elements through channel_blocks()");
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

bool Tensor::is_contiguous() const {
  if (blocked_) return false;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

bool Tensor::is_channels_last() const {
  if (dim() != 4 || blocked_) return false;
  int64_t expected = 1;
  for (int64_t d : {1, 3, 2, 0}) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

bool Tensor::is_same(const Tensor& other) const {
  return storage_ == other.storage_ && offset_ == other.offset_ && sizes_ == other.sizes_ &&
         strides_ == other.strides_ && dtype_ == other.dtype_ && blocked_ == other.blocked_;
}

Tensor Tensor::channel_blocks() const {
  TS_CHECK(dim() == 4 && sizes_[1] % 16 == 0, "channel_blocks: needs a 4-D [N, C, H, W] tensor "
           "with C a multiple of 16, got shape ", sizes_);
  const Shape sizes{sizes_[0], sizes_[1] / 16, sizes_[2], sizes_[3], 16};
  if (blocked_) return Tensor(storage_, sizes, contiguous_strides(sizes), offset_, dtype_);
  // Channel 16b + l of a strided tensor: b steps 16 channels, l one.
  return Tensor(storage_, sizes,
                {strides_[0], 16 * strides_[1], strides_[2], strides_[3], strides_[1]}, offset_,
                dtype_);
}

void* Tensor::raw_data() const {
  TS_CHECK(defined(), "Tensor::raw_data: undefined tensor");
  check_strided("Tensor::raw_data");
  TS_CHECK(storage_->is_materialized(),
           "Tensor::raw_data: the storage has been released (materialize it first)");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

// ---------------------------------------------------------------------------- views

Tensor Tensor::view(Shape shape) const {
  check_strided("view");
  shape = infer_shape(std::move(shape), numel_, "view", sizes_);
  auto strides = view_strides(sizes_, strides_, shape);
  TS_CHECK(strides.has_value(), "view: shape ", shape, " is not compatible with input of shape ",
           sizes_, " and strides ", strides_, " (use reshape, which copies)",
           is_channels_last() && !is_contiguous()
               ? "; the input is channels-last (NHWC), as convolutions give where asked "
                 "(Module::to(MemoryFormat::kChannelsLast)) and for bf16 on CPUs with AMX "
                 "(set_allow_preferred_layout, tensor/accelerator.h)"
               : "");
  return Tensor(storage_, std::move(shape), std::move(*strides), offset_, dtype_);
}

Tensor Tensor::reshape(Shape shape) const {
  if (blocked_) return contiguous().reshape(std::move(shape));
  shape = infer_shape(std::move(shape), numel_, "reshape", sizes_);
  if (auto strides = view_strides(sizes_, strides_, shape)) {
    return Tensor(storage_, std::move(shape), std::move(*strides), offset_, dtype_);
  }
  return contiguous().view(std::move(shape));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  TS_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " > end_dim ", end_dim);
  Shape shape(sizes_.begin(), sizes_.begin() + start_dim);
  int64_t n = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) n *= sizes_[d];
  shape.push_back(n);
  shape.insert(shape.end(), sizes_.begin() + end_dim + 1, sizes_.end());
  return reshape(shape);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_strided("narrow");
  d = wrap_dim(d, dim(), "narrow");
  if (start < 0) start += sizes_[d];
  TS_CHECK(start >= 0 && length >= 0 && start + length <= sizes_[d], "narrow: range [", start,
           ", ", start + length, ") out of bounds for dim ", d, " of size ", sizes_[d]);
  Shape sizes = sizes_;
  sizes[d] = length;
  return Tensor(storage_, sizes, strides_, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_strided("slice");
  d = wrap_dim(d, dim(), "slice");
  TS_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = sizes_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = sizes_, strides = strides_;
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  return Tensor(storage_, sizes, strides, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_strided("select");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes_[d];
  TS_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d,
           " of size ", n);
  if (index < 0) index += n;
  Shape sizes = sizes_, strides = strides_;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, sizes, strides, offset_ + index * strides_[d], dtype_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_strided("transpose");
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  Shape sizes = sizes_, strides = strides_;
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::t() const {
  TS_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", sizes_);
  return transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  check_strided("permute");
  TS_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(),
           " dims for a tensor of shape ", sizes_);
  Shape sizes(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    TS_CHECK(!seen[d], "permute: dim ", d, " repeated in ", dims);
    seen[d] = true;
    sizes[i] = sizes_[d];
    strides[i] = strides_[d];
  }
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  check_strided("expand");
  TS_CHECK(shape.size() >= sizes_.size(), "expand: cannot expand shape ", sizes_, " to ", shape,
           " (fewer dims)");
  const size_t lead = shape.size() - sizes_.size();
  Shape sizes(shape.size()), strides(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      TS_CHECK(shape[i] >= 0, "expand: new leading dim ", i, " must be sized, got ", shape);
      sizes[i] = shape[i];
      strides[i] = 0;
      continue;
    }
    const int64_t own = sizes_[i - lead];
    const int64_t want = shape[i] == -1 ? own : shape[i];
    TS_CHECK(own == want || own == 1, "expand: cannot expand shape ", sizes_, " to ", shape,
             " (dim ", i, ": ", own, " vs ", want, ")");
    sizes[i] = want;
    strides[i] = own == want ? strides_[i - lead] : 0;
  }
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
  check_strided("squeeze");
  Shape sizes, strides;
  for (int64_t d = 0; d < dim(); ++d) {
    if (sizes_[d] != 1) {
      sizes.push_back(sizes_[d]);
      strides.push_back(strides_[d]);
    }
  }
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
  check_strided("squeeze");
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes_[d] != 1) return *this;
  Shape sizes = sizes_, strides = strides_;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_strided("unsqueeze");
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sizes = sizes_, strides = strides_;
  const int64_t stride = d < dim() ? strides_[d] * sizes_[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return Tensor(storage_, sizes, strides, offset_, dtype_);
}

// ---------------------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::kContiguous) return contiguous();
  TS_CHECK(dim() == 4, "contiguous: ", format == MemoryFormat::kChannelsLast ? "channels-last"
           : "channels-blocked", " needs a 4-D [N, C, H, W] tensor, got shape ", sizes_);
  if (is_contiguous(format)) return *this;
  Tensor out = empty(sizes_, options(), format);
  out.copy_(*this);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(sizes_, options());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(sizes_, TensorOptions(dtype).device(device()));
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  if (blocked_) return contiguous().to(target);
  Tensor out = empty(sizes_, TensorOptions(dtype_).device(target));
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(const TensorOptions& options) const {
  return to(options.device()).to(options.dtype());
}

Tensor Tensor::pin_memory() const {
  TS_CHECK(device().is_cpu(), "pin_memory: only CPU tensors can be pinned, this one is on ",
           device());
  if (is_pinned()) return *this;
  auto storage = std::make_shared<Storage>(nbytes(), Device::cpu(), get_pinned_allocator());
  Tensor out(std::move(storage), sizes_, contiguous_strides(sizes_), 0, dtype_);
  out.copy_(*this);
  return out;
}

bool Tensor::is_pinned() const {
  return defined() && device().is_cpu() && storage_->allocator() != get_allocator(DeviceType::kCPU);
}

Tensor& Tensor::copy_(const Tensor& src) {
  TS_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  if (src.blocked_ && (src.shape() != sizes_ || !device().is_cpu())) {
    return copy_(src.contiguous());
  }
  if (blocked_ || src.blocked_) {
    // Element for element through both sides' strided [N, C/16, H, W, 16] (channels-blocked
    // tensors live on the CPU).
    const Tensor from = (src.shape() == sizes_ ? src : src.expand(sizes_)).to(Device::cpu());
    backend(Device::cpu()).copy(from.channel_blocks(), channel_blocks());
    return *this;
  }
  Tensor from = src.shape() == sizes_ ? src : src.expand(sizes_);
  // A device backend knows how to move bytes between itself and the CPU.
  const Device d = device().is_cpu() ? from.device() : device();
  backend(d).copy(from, *this);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  backend(device()).fill(blocked_ ? channel_blocks() : *this, value);
  return *this;
}

// ---------------------------------------------------------------------------- element access

double Tensor::item() const {
  TS_CHECK(numel_ == 1, "item: tensor of shape ", sizes_, " has ", numel_,
           " elements, expected exactly one");
  return to_vector<double>()[0];
}

double Tensor::at(const Shape& index) const {
  TS_CHECK(static_cast<int64_t>(index.size()) == dim(), "at: index ", index,
           " has the wrong number of dims for shape ", sizes_);
  if (blocked_) return contiguous().at(index);
  Tensor t = *this;
  for (int64_t d = dim() - 1; d >= 0; --d) t = t.select(d, index[d]);
  return t.item();
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = cpu().to(DTypeOf<T>::value).contiguous();
  std::vector<T> out(numel_);
  if (numel_ > 0) std::memcpy(out.data(), host.raw_data(), numel_ * sizeof(T));
  return out;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

std::string Tensor::str() const {
  if (!defined()) return "Tensor[undefined]";
  return detail::str("Tensor[", dtype_, ", ", device(), ", ", sizes_, "]");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  os << t.str();
  if (t.defined() && t.numel() <= 64 && t.numel() > 0) {
    os << ' ';
    detail::put(os, t.to_vector<double>());
  }
  return os;
}

// ---------------------------------------------------------------------------- factories

Tensor empty(const Shape& shape, const TensorOptions& options) {
  for (int64_t s : shape) TS_CHECK(s >= 0, "empty: negative size in shape ", shape);
  const size_t nbytes = numel(shape) * element_size(options.dtype());
  auto storage = std::make_shared<Storage>(nbytes, options.device());
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
