#include "tensor/cpu/conv_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

#include "tensor/cpu/conv_path.h"
#include "tensor/cpu/gemm_onednn.h"
#include "tensor/cpu/onednn_memory.h"

namespace tessera {
namespace cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// The three descriptors and the geometry every primitive of one convolution shares. Grouped
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
  // An activation's layout in tessera: contiguous NCHW, channels-last NHWC, or channels-blocked
  // nChw16c. A tensor that is both of the first two (one channel, or 1x1 maps) is NHWC where the
  // primitives take NHWC, so needs no reorder.
  memory::desc plain_src(const memory::dims& d, const Tensor& t) const {
    if (t.is_channels_blocked()) return memory::desc(d, type, Tag::nChw16c);
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
    return dnnl::convolution_forward::primitive_desc(d, attributes(), onednn_engine());
  }
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
          onednn_engine());
      dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, wino, x, w, b, x,
                                          strides, pad, pad),
          onednn_engine());
      dnnl::convolution_backward_data::primitive_desc(
          dnnl::convolution_backward_data::desc(wino, x, w, x, strides, pad, pad), onednn_engine(),
          hint);
      dnnl::convolution_backward_weights::primitive_desc(
          dnnl::convolution_backward_weights::desc(wino, x, w, x, strides, pad, pad), onednn_engine(),
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
          onednn_engine());
      return pd.src_desc() == memory::desc(src, bf16, Tag::nhwc);
    } catch (const dnnl::error&) {
      return false;  // no such primitive: no layout to prefer (bf16 then widens, conv.cc)
    }
  }();
  return prefers;
}

bool any_nhwc(std::initializer_list<const Tensor*> activations) {
  for (const Tensor* a : activations) {
    if (a->defined() && a->is_channels_last() && !a->is_contiguous()) return true;
  }
  return false;
}

bool any_channels_blocked(std::initializer_list<const Tensor*> activations) {
  for (const Tensor* a : activations) {
    if (a->defined() && a->is_channels_blocked()) return true;
  }
  return false;
}

void conv2d_onednn(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out) {
  const ConvSetup c(input.shape(), weight.shape(), out.shape(), p, input.dtype(),
                    any_nhwc({&input, &out}));
  const auto pd = c.forward(bias.defined());
  dnnl::stream s(onednn_engine());
  Operand x(c.plain_src(c.src, input), input, pd.src_desc());
  Operand w(c.plain_weights(), weight, pd.weights_desc());
  Operand y(c.plain_src(c.dst, out), out, pd.dst_desc());
  x.to_primitive(s);
  w.to_primitive(s);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x.mem()}, {DNNL_ARG_WEIGHTS, w.mem()}, {DNNL_ARG_DST, y.mem()}};
  // An f16/bf16 bias for an f32 primitive is widened (it is small).
  const Tensor b = !bias.defined() || c.type == memory::data_type::bf16 ? bias : bias.to(kF32);
  if (b.defined()) args[DNNL_ARG_BIAS] = memory(pd.bias_desc(), onednn_engine(), b.raw_data());
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
      ConvSetup::attributes(), onednn_engine(), hint);
}

dnnl::convolution_backward_weights::primitive_desc backward_weights(const ConvSetup& c,
                                                                    const ForwardPd& hint) {
  return dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(c.algorithm,
                                               c.activation(c.src), c.any(c.weights),
                                               c.activation(c.dst), c.strides, c.dilates, c.pad,
                                               c.pad),
      ConvSetup::attributes(), onednn_engine(), hint);
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
  dnnl::stream s(onednn_engine());
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
  dnnl::stream s(onednn_engine());
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
  dnnl::stream s(onednn_engine());
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
