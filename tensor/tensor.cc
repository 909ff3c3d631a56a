// Tensor itself: its layout queries (contiguous, channels-last, channels-blocked and
// channel_blocks()), element addresses, copies between layouts, dtypes and devices, and element
// access. Views are in tensor_views.cc, factories in factories.cc.
#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "tensor/allocator.h"
#include "tensor/backend.h"
#include "tensor/deferred_init.h"

namespace tessera {

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
  TS_CHECK(!storage_->deferred(), "Tensor::raw_data: this ", sizes_, " ", dtype_, " tensor was "
           "made under DeferredInit and holds no values yet (tensor/deferred_init.h): "
           "materialize() it first, as FullyShardedDataParallel does unit by unit");
  TS_CHECK(storage_->absent_why().empty(), "Tensor::raw_data: this tensor holds no values: ",
           storage_->absent_why());
  TS_CHECK(storage_->is_materialized(),
           "Tensor::raw_data: the storage has been released (materialize it first)");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
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
  DeferredFill constant;
  constant.kind = DeferredFill::Kind::kConstant;
  constant.a = value;
  if (detail::record_deferred_fill(*this, constant, "fill_")) return *this;
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

}  // namespace tessera
