#include "tensor/cpu/conv_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

#include "tensor/cpu/channel_blocks.h"
#include "tensor/cpu/conv_path.h"
#include "tensor/cpu/gemm_onednn.h"
#include "tensor/cpu/transpose16.h"

namespace tessera {
namespace cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory::dims dims_of(const Tensor& t) { return memory::dims(t.shape().begin(), t.shape().end()); }

// The three descriptors and the geometry every primitive of one convolution shares. Grouped
// Memory for oneDNN in tessera's allocator, whose cache hands the same blocks back step after
// step. Memory oneDNN allocates itself (the primitives' copies of operands and their scratchpads)
// came fresh from the system on every call and was paid for in page faults: about 15,000 a
// step in ResNet-18's f32 step, against about 40 in its bf16 step, whose layouts need fewer.
Tensor onednn_buffer(const memory::desc& desc) {
  return empty({static_cast<int64_t>((desc.get_size() + 3) / 4)}, kF32);
}

// A primitive's scratchpad (ConvSetup::attributes asks to be given it) in tessera's allocator.
class Scratchpad {
 public:
  explicit Scratchpad(const memory::desc& desc) {
    if (desc.get_size() == 0) return;
    buffer_ = onednn_buffer(desc);
    mem_ = memory(desc, engine(), buffer_.raw_data());
  }
  void add_to(std::unordered_map<int, memory>* args) const {
    if (buffer_.defined()) (*args)[DNNL_ARG_SCRATCHPAD] = mem_;
  }

 private:
  Tensor buffer_;
  memory mem_;
};

// weights are [G, O/G, C/G, kh, kw] to oneDNN (the same bytes as tessera's [O, C/G, kh, kw]).
struct ConvSetup {
  memory::dims src, weights, dst, strides, dilates, pad;
  memory::data_type type;
  bool grouped = false;

  // f32 convolutions with a channels-last activation (any_nhwc) give the direct primitives NHWC
  // for all of them (`any` made oneDNN 2.6 pick nChw16c and reorder both ways); otherwise the
  // primitive picks.
  memory::format_tag activations = Tag::any;

  // Winograd's F(4x4, 3x3) for the f32 primitives (f32, and f16/bf16 converted into them)
  // where conv_path.h says so; else direct.
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;

  ConvSetup(const Shape& input, const Shape& weight, const Shape& output, const Conv2dParams& p,
            DType dtype, bool nhwc = false)
      : src(input.begin(), input.end()),
        weights(weight.begin(), weight.end()),
        dst(output.begin(), output.end()),
        strides{p.stride[0], p.stride[1]},
        // oneDNN counts dilation from 0 (0: dense); tessera from 1, as PyTorch.
        dilates{p.dilation[0] - 1, p.dilation[1] - 1},
        pad{p.padding[0], p.padding[1]},
        type(dtype == kBF16 && onednn_bf16_available() ? memory::data_type::bf16
                                                       : memory::data_type::f32),
        grouped(p.groups > 1) {
    if (grouped) {
      weights = {p.groups, weight[0] / p.groups, weight[1], weight[2], weight[3]};
    }
    if (type == memory::data_type::f32 && conv_uses_winograd(input, weight, p)) {
      // Its primitives want nChw16c, so channels-last activations are reordered too (the
      // reorders cost far less than the products saved).
      algorithm = dnnl::algorithm::convolution_winograd;
    } else if (nhwc && type == memory::data_type::f32) {
      activations = Tag::nhwc;
    }
  }
  // Descriptors with format `any`: the primitive picks its favourite layout.
  memory::desc any(const memory::dims& d) const {
    return memory::desc(d, type, Tag::any);
  }
  // An activation's descriptor for a primitive: `any`, or NHWC where `activations` pins it.
  memory::desc activation(const memory::dims& d) const {
    return memory::desc(d, type, activations);
  }
  // An activation's layout in tessera: contiguous NCHW, or channels-last NHWC. A tensor that is
  // both (one channel, or 1x1 maps) is NHWC where the primitives take NHWC, so needs no reorder.
  memory::desc plain_src(const memory::dims& d, const Tensor& t) const {
    const bool nhwc = !t.is_contiguous() || (activations == Tag::nhwc && t.is_channels_last());
    return memory::desc(d, type, nhwc ? Tag::nhwc : Tag::nchw);
  }
  memory::desc plain_weights() const {
    return memory::desc(weights, type, grouped ? Tag::goihw : Tag::oihw);
  }
  // Every primitive's scratchpad is given at execution (Scratchpad).
  static dnnl::primitive_attr attributes() {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  }
  dnnl::convolution_forward::primitive_desc forward(bool with_bias) const {
    const auto kind = dnnl::prop_kind::forward_training;
    const auto d = with_bias ? dnnl::convolution_forward::desc(
                                   kind, algorithm, activation(src), any(weights),
                                   memory::desc({dst[1]}, type, Tag::x),
                                   activation(dst), strides, dilates, pad, pad)
                             : dnnl::convolution_forward::desc(kind, algorithm, activation(src),
                                                               any(weights), activation(dst),
                                                               strides, dilates, pad, pad);
    return dnnl::convolution_forward::primitive_desc(d, attributes(), engine());
  }
};

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

// A tensor's data as oneDNN memory in the layout `wanted`: the tensor itself when the layouts and
// types agree, else a reordered copy (`to_primitive`), or a scratch buffer to reorder back from
// after the primitive ran (`from_primitive`). `plain` is the tensor's own layout in the primitive's
// type. An f16/bf16 tensor for an f32 primitive is converted on the way: in one pass where the
// primitive wants NCHW, nChw16c or tiles of 16 x 16 weight channels (channel_blocks.h), else
// widened into a plain f32 copy that oneDNN's reorder reads (narrowed after it on the way back).
// A bf16 activation for a native bf16 primitive that wants NHWC is transposed by transpose16.h,
// faster than oneDNN's own reorder for it.
class Operand {
 public:
  Operand(const memory::desc& plain, const Tensor& t, const memory::desc& wanted) : tensor_(t) {
    const bool converts =
        t.dtype() != (plain.data_type() == memory::data_type::bf16 ? kBF16 : kF32);
    if (converts && is_channel_blocked(plain, wanted)) {
      how_ = How::kChannelBlocks;
    } else if (converts && is_weight_blocked(plain, wanted, &weight_blocks_)) {
      how_ = How::kWeightBlocks;
    } else if (converts) {
      // An f32 tensor in the same layout (NCHW, or channels-last NHWC) as t.
      how_ = How::kWidenAndReorder;
      wide_ = empty(t.shape(), kF32,
                    t.is_contiguous() ? MemoryFormat::kContiguous : MemoryFormat::kChannelsLast);
      user_ = memory(plain, engine(), wide_.raw_data());
    } else if (is_bf16_to_nhwc(plain, wanted)) {
      how_ = How::kTransposeToNhwc;
    } else {
      user_ = memory(plain, engine(), t.raw_data());
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
      mem_ = memory(wanted, engine(), buffer_.raw_data());
    }
  }
  const memory& mem() const { return mem_; }

  void to_primitive(dnnl::stream& s) {
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

  void from_primitive(dnnl::stream& s) {
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

 private:
  enum class How {
    kSameType,          // the tensor itself, or oneDNN's reorder both ways
    kChannelBlocks,     // f16/bf16 activations <-> f32 nChw16c (channel_blocks.h)
    kWeightBlocks,      // f16/bf16 weights <-> f32 16x16 tiles (channel_blocks.h)
    kF32WeightTiles,    // f32 weights: oneDNN's reorder in, tessera's gather out
    kTransposeToNhwc,   // bf16 activations <-> bf16 NHWC (transpose16.h)
    kWidenAndReorder,   // f16/bf16 anything else: widened copy, oneDNN's reorder
  };

  static float* data(const memory& m) { return static_cast<float*>(m.get_data_handle()); }
  static uint16_t* bits(void* p) { return static_cast<uint16_t*>(p); }
  int64_t n() const { return tensor_.size(0); }
  int64_t c() const { return tensor_.size(1); }
  int64_t positions() const { return tensor_.size(2) * tensor_.size(3); }
  // f(pointer to the tensor's f16 or bf16 data).
  template <typename F>
  void convert(F f) const {
    if (tensor_.dtype() == kF16) return f(tensor_.data<Half>());
    f(tensor_.data<BFloat16>());
  }

  Tensor tensor_;
  Tensor wide_;    // kWidenAndReorder: the f32 copy oneDNN's reorder reads or writes
  Tensor buffer_;  // the memory behind mem_ when it is not the tensor's own
  How how_ = How::kSameType;
  WeightBlocks weight_blocks_{};
  memory user_, mem_;
};

}  // namespace

bool onednn_winograd_available() {
  // Every primitive a convolution may ask for: forward with and without bias, both gradients.
  static const bool available = [] {
    const memory::dims src{1, 32, 8, 8}, weights{32, 32, 3, 3}, strides{1, 1}, pad{1, 1};
    const auto f32 = memory::data_type::f32;
    const memory::desc x(src, f32, Tag::any), w(weights, f32, Tag::any), b({32}, f32, Tag::x);
    const auto wino = dnnl::algorithm::convolution_winograd;
    try {
      const dnnl::convolution_forward::primitive_desc hint(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, wino, x, w, x,
                                          strides, pad, pad),
          engine());
      dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, wino, x, w, b, x,
                                          strides, pad, pad),
          engine());
      dnnl::convolution_backward_data::primitive_desc(
          dnnl::convolution_backward_data::desc(wino, x, w, x, strides, pad, pad), engine(),
          hint);
      dnnl::convolution_backward_weights::primitive_desc(
          dnnl::convolution_backward_weights::desc(wino, x, w, x, strides, pad, pad), engine(),
          hint);
      return true;
    } catch (const dnnl::error&) {
      return false;  // oneDNN has no Winograd kernels for this CPU's instruction set
    }
  }();
  return available;
}

bool onednn_bf16_prefers_nhwc() {
  static const bool prefers = [] {
    if (!onednn_bf16_available()) return false;
    const memory::dims src{8, 64, 56, 56}, weights{64, 64, 3, 3}, strides{1, 1}, pad{1, 1};
    const auto bf16 = memory::data_type::bf16;
    const memory::desc x(src, bf16, Tag::any), w(weights, bf16, Tag::any);
    try {
      const dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                          dnnl::algorithm::convolution_direct, x, w, x, strides,
                                          pad, pad),
          engine());
      return pd.src_desc() == memory::desc(src, bf16, Tag::nhwc);
    } catch (const dnnl::error&) {
      return false;  // no such primitive: no layout to prefer (bf16 then widens, conv.cc)
    }
  }();
  return prefers;
}

bool any_nhwc(std::initializer_list<const Tensor*> activations) {
  for (const Tensor* a : activations) {
    if (!a->is_contiguous()) return true;
  }
  return false;
}

void conv2d_onednn(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out) {
  const ConvSetup c(input.shape(), weight.shape(), out.shape(), p, input.dtype(),
                    any_nhwc({&input, &out}));
  const auto pd = c.forward(bias.defined());
  dnnl::stream s(engine());
  Operand x(c.plain_src(c.src, input), input, pd.src_desc());
  Operand w(c.plain_weights(), weight, pd.weights_desc());
  Operand y(c.plain_src(c.dst, out), out, pd.dst_desc());
  x.to_primitive(s);
  w.to_primitive(s);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x.mem()}, {DNNL_ARG_WEIGHTS, w.mem()}, {DNNL_ARG_DST, y.mem()}};
  // An f16/bf16 bias for an f32 primitive is widened (it is small).
  const Tensor b = !bias.defined() || c.type == memory::data_type::bf16 ? bias : bias.to(kF32);
  if (b.defined()) args[DNNL_ARG_BIAS] = memory(pd.bias_desc(), engine(), b.raw_data());
  const Scratchpad scratchpad(pd.scratchpad_desc());
  scratchpad.add_to(&args);
  dnnl::convolution_forward(pd).execute(s, args);
  y.from_primitive(s);
  s.wait();
}

namespace {

// The backward primitives, each given the forward's primitive_desc as oneDNN's hint (the joint
// call builds that once for both).
using ForwardPd = dnnl::convolution_forward::primitive_desc;

dnnl::convolution_backward_data::primitive_desc backward_data(const ConvSetup& c,
                                                              const ForwardPd& hint) {
  return dnnl::convolution_backward_data::primitive_desc(
      dnnl::convolution_backward_data::desc(c.algorithm,
                                            c.activation(c.src), c.any(c.weights),
                                            c.activation(c.dst), c.strides, c.dilates, c.pad,
                                            c.pad),
      ConvSetup::attributes(), engine(), hint);
}

dnnl::convolution_backward_weights::primitive_desc backward_weights(const ConvSetup& c,
                                                                    const ForwardPd& hint) {
  return dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(c.algorithm,
                                               c.activation(c.src), c.any(c.weights),
                                               c.activation(c.dst), c.strides, c.dilates, c.pad,
                                               c.pad),
      ConvSetup::attributes(), engine(), hint);
}

// The passes given the output gradient already in the layout their primitive wants.
void run_backward_data(const ConvSetup& c,
                       const dnnl::convolution_backward_data::primitive_desc& pd,
                       const memory& dy, const Tensor& weight, const Tensor& grad_in,
                       dnnl::stream& s) {
  Operand w(c.plain_weights(), weight, pd.weights_desc());
  Operand dx(c.plain_src(c.src, grad_in), grad_in, pd.diff_src_desc());
  w.to_primitive(s);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w.mem()}, {DNNL_ARG_DIFF_SRC, dx.mem()}};
  const Scratchpad scratchpad(pd.scratchpad_desc());
  scratchpad.add_to(&args);
  dnnl::convolution_backward_data(pd).execute(s, args);
  dx.from_primitive(s);
}

void run_backward_weights(const ConvSetup& c,
                          const dnnl::convolution_backward_weights::primitive_desc& pd,
                          const memory& dy, const Tensor& input, const Tensor& grad_weight,
                          dnnl::stream& s) {
  Operand x(c.plain_src(c.src, input), input, pd.src_desc());
  Operand dw(c.plain_weights(), grad_weight, pd.diff_weights_desc());
  x.to_primitive(s);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x.mem()}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw.mem()}};
  const Scratchpad scratchpad(pd.scratchpad_desc());
  scratchpad.add_to(&args);
  dnnl::convolution_backward_weights(pd).execute(s, args);
  dw.from_primitive(s);
}

}  // namespace

void conv2d_backward_input_onednn(const Tensor& grad_out, const Tensor& weight,
                                  const Conv2dParams& p, const Tensor& grad_in) {
  const ConvSetup c(grad_in.shape(), weight.shape(), grad_out.shape(), p, weight.dtype(),
                    any_nhwc({&grad_in, &grad_out}));
  const auto pd = backward_data(c, c.forward(false));
  dnnl::stream s(engine());
  Operand dy(c.plain_src(c.dst, grad_out), grad_out, pd.diff_dst_desc());
  dy.to_primitive(s);
  run_backward_data(c, pd, dy.mem(), weight, grad_in, s);
  s.wait();
}

void conv2d_backward_weight_onednn(const Tensor& grad_out, const Tensor& input,
                                   const Conv2dParams& p, const Tensor& grad_weight) {
  const ConvSetup c(input.shape(), grad_weight.shape(), grad_out.shape(), p, input.dtype(),
                    any_nhwc({&input, &grad_out}));
  const auto pd = backward_weights(c, c.forward(false));
  dnnl::stream s(engine());
  Operand dy(c.plain_src(c.dst, grad_out), grad_out, pd.diff_dst_desc());
  dy.to_primitive(s);
  run_backward_weights(c, pd, dy.mem(), input, grad_weight, s);
  s.wait();
}

void conv2d_backward_onednn(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const Conv2dParams& p, const Tensor& grad_in,
                            const Tensor& grad_weight) {
  const ConvSetup c(input.shape(), weight.shape(), grad_out.shape(), p, weight.dtype(),
                    any_nhwc({&input, &grad_out, &grad_in}));
  const ForwardPd hint = c.forward(false);
  const auto data_pd = backward_data(c, hint);
  const auto weights_pd = backward_weights(c, hint);
  dnnl::stream s(engine());
  // One reorder of the output gradient serves both passes when they want the same layout
  // (bf16: both nChw16c).
  Operand dy(c.plain_src(c.dst, grad_out), grad_out, data_pd.diff_dst_desc());
  dy.to_primitive(s);
  run_backward_data(c, data_pd, dy.mem(), weight, grad_in, s);
  if (weights_pd.diff_dst_desc() == data_pd.diff_dst_desc()) {
    run_backward_weights(c, weights_pd, dy.mem(), input, grad_weight, s);
  } else {
    Operand dy_w(c.plain_src(c.dst, grad_out), grad_out, weights_pd.diff_dst_desc());
    dy_w.to_primitive(s);
    run_backward_weights(c, weights_pd, dy_w.mem(), input, grad_weight, s);
  }
  s.wait();
}

}  // namespace cpu
}  // namespace tessera
