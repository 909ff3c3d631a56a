#include "tensor/cpu/onednn_memory.h"

#include "tensor/cpu/transpose16.h"

namespace tessera {
namespace cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// True when `plain` is f32 NCHW and `wanted` f32 nChw16c of the same shape with whole blocks of
// channels: the reorder channel_blocks.h does while converting.
bool is_channel_blocked(const memory::desc& plain, const memory::desc& wanted) {
  const memory::dims d = plain.dims();
  const auto f32 = memory::data_type::f32;
  return d.size() == 4 && d[1] % 16 == 0 && plain == memory::desc(d, f32, Tag::nchw) &&
         wanted == memory::desc(d, f32, Tag::nChw16c);
}

// True when `plain` is bf16 NCHW and `wanted` bf16 NHWC of the same shape: the transpose
// transpose16.h does (oneDNN's bf16 primitives pick NHWC on CPUs with native bf16).
bool is_bf16_to_nhwc(const memory::desc& plain, const memory::desc& wanted) {
  const memory::dims d = plain.dims();
  const auto bf16 = memory::data_type::bf16;
  return d.size() == 4 && plain == memory::desc(d, bf16, Tag::nchw) &&
         wanted == memory::desc(d, bf16, Tag::nhwc);
}

// True when `plain` is f32 OIHW and `wanted` keeps 16 x 16 tiles of output and input channels (the
// weight reorders channel_blocks.h does while converting); fills *b.
bool is_weight_blocked(const memory::desc& plain, const memory::desc& wanted, WeightBlocks* b) {
  const memory::dims d = plain.dims();
  const auto f32 = memory::data_type::f32;
  if (d.size() != 4 || d[0] % 16 != 0 || d[1] % 16 != 0) return false;
  if (plain != memory::desc(d, f32, Tag::oihw) || wanted.data_type() != f32) return false;
  const dnnl_memory_desc_t& w = wanted.data;
  if (w.format_kind != dnnl_blocked || w.offset0 != 0) return false;
  for (int k = 0; k < 4; ++k) {
    if (w.padded_dims[k] != d[k]) return false;
  }
  const auto& blocking = w.format_desc.blocking;
  if (blocking.inner_nblks != 2 || blocking.inner_blks[0] != 16 || blocking.inner_blks[1] != 16) {
    return false;
  }
  const bool o_innermost = blocking.inner_idxs[0] == 1 && blocking.inner_idxs[1] == 0;
  const bool i_innermost = blocking.inner_idxs[0] == 0 && blocking.inner_idxs[1] == 1;
  if (!o_innermost && !i_innermost) return false;
  const auto& st = blocking.strides;
  *b = {d[0], d[1], d[2], d[3], {st[0], st[1], st[2], st[3]}, o_innermost};
  return true;
}

}  // namespace

const dnnl::engine& onednn_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Tensor onednn_buffer(const memory::desc& desc) {
  return empty({static_cast<int64_t>((desc.get_size() + 3) / 4)}, kF32);
}

Operand::Operand(const memory::desc& plain, const Tensor& t, const memory::desc& wanted)
    : tensor_(t) {
  const bool converts =
      t.dtype() != (plain.data_type() == memory::data_type::bf16 ? kBF16 : kF32);
  if (converts && is_channel_blocked(plain, wanted)) {
    how_ = How::kChannelBlocks;
  } else if (converts && is_weight_blocked(plain, wanted, &weight_blocks_)) {
    how_ = How::kWeightBlocks;
  } else if (converts) {
    // An f32 tensor in the same layout (NCHW, or channels-last NHWC) as t. (Channels-blocked
    // tensors reach oneDNN in f32 only: Backend::channels_blocked.)
    TS_INTERNAL_ASSERT(!t.is_channels_blocked());
    how_ = How::kWidenAndReorder;
    wide_ = empty(t.shape(), kF32,
                  t.is_contiguous() ? MemoryFormat::kContiguous : MemoryFormat::kChannelsLast);
    user_ = memory(plain, onednn_engine(), wide_.raw_data());
  } else if (is_bf16_to_nhwc(plain, wanted)) {
    how_ = How::kTransposeToNhwc;
  } else {
    // A channels-blocked tensor's memory is its channel_blocks() (it has no strides).
    user_ = memory(plain, onednn_engine(),
                   t.is_channels_blocked() ? t.channel_blocks().raw_data() : t.raw_data());
    // f32 weights go into the tiles by oneDNN's reorder (no slower than tessera's in a step),
    // and a weight gradient comes back by tessera's gather: oneDNN's took 3.2 ms for
    // ResNet-50's 512x2048 1x1 weights where this takes 0.7.
    if (t.dtype() == kF32 && is_weight_blocked(plain, wanted, &weight_blocks_)) {
      how_ = How::kF32WeightTiles;
    }
  }
  if (plain == wanted && user_) {
    mem_ = user_;
  } else {
    buffer_ = onednn_buffer(wanted);  // the primitive's copy
    mem_ = memory(wanted, onednn_engine(), buffer_.raw_data());
  }
}

void Operand::to_primitive(dnnl::stream& s) {
  switch (how_) {
    case How::kChannelBlocks:
      return convert([&](auto* t) { to_channel_blocks(t, data(mem_), n(), c(), positions()); });
    case How::kWeightBlocks:
      return convert([&](auto* t) { to_weight_blocks(t, data(mem_), weight_blocks_); });
    case How::kTransposeToNhwc:
      return nchw_to_nhwc_16bit(bits(tensor_.raw_data()), bits(mem_.get_data_handle()), n(), c(),
                                positions());
    case How::kWidenAndReorder:
      wide_.copy_(tensor_);
      break;
    case How::kF32WeightTiles:
    case How::kSameType:
      break;
  }
  if (mem_ != user_) dnnl::reorder(user_, mem_).execute(s, user_, mem_);
}

void Operand::from_primitive(dnnl::stream& s) {
  switch (how_) {
    case How::kChannelBlocks:
      return convert([&](auto* t) { from_channel_blocks(data(mem_), t, n(), c(), positions()); });
    case How::kWeightBlocks:
      return convert([&](auto* t) { from_weight_blocks(data(mem_), t, weight_blocks_); });
    case How::kTransposeToNhwc:
      return nhwc_to_nchw_16bit(bits(mem_.get_data_handle()), bits(tensor_.raw_data()), n(), c(),
                                positions());
    case How::kF32WeightTiles:
      return from_weight_blocks(data(mem_), tensor_.data<float>(), weight_blocks_);
    case How::kWidenAndReorder:
    case How::kSameType:
      break;
  }
  if (mem_ != user_) dnnl::reorder(mem_, user_).execute(s, mem_, user_);
  if (how_ == How::kWidenAndReorder) Tensor(tensor_).copy_(wide_);
}

}  // namespace cpu
}  // namespace tessera
