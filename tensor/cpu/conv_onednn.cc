#include "tensor/cpu/conv_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

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
// weights are [G, O/G, C/G, kh, kw] to oneDNN (the same bytes as tessera's [O, C/G, kh, kw]).
struct ConvSetup {
  memory::dims src, weights, dst, strides, dilates, pad;
  memory::data_type type;
  bool grouped = false;

  ConvSetup(const Shape& input, const Shape& weight, const Shape& output, const Conv2dParams& p,
            DType dtype)
      : src(input.begin(), input.end()),
        weights(weight.begin(), weight.end()),
        dst(output.begin(), output.end()),
        strides{p.stride[0], p.stride[1]},
        // oneDNN counts dilation from 0 (0: dense); tessera from 1, as PyTorch.
        dilates{p.dilation[0] - 1, p.dilation[1] - 1},
        pad{p.padding[0], p.padding[1]},
        type(dtype == kBF16 ? memory::data_type::bf16 : memory::data_type::f32),
        grouped(p.groups > 1) {
    if (grouped) {
      weights = {p.groups, weight[0] / p.groups, weight[1], weight[2], weight[3]};
    }
  }
  // Descriptors with format `any`: the primitive picks its favourite layout.
  memory::desc any(const memory::dims& d) const {
    return memory::desc(d, type, Tag::any);
  }
  // An activation's layout in tessera: contiguous NCHW, or channels-last NHWC.
  memory::desc plain_src(const memory::dims& d, const Tensor& t) const {
    return memory::desc(d, type, t.is_contiguous() ? Tag::nchw : Tag::nhwc);
  }
  memory::desc plain_weights() const {
    return memory::desc(weights, type, grouped ? Tag::goihw : Tag::oihw);
  }
  dnnl::convolution_forward::primitive_desc forward(bool with_bias) const {
    const auto kind = dnnl::prop_kind::forward_training;
    const auto algo = dnnl::algorithm::convolution_direct;
    const auto d = with_bias ? dnnl::convolution_forward::desc(
                                   kind, algo, any(src), any(weights),
                                   memory::desc({dst[1]}, type, Tag::x),
                                   any(dst), strides, dilates, pad, pad)
                             : dnnl::convolution_forward::desc(kind, algo, any(src), any(weights),
                                                               any(dst), strides, dilates, pad,
                                                               pad);
    return dnnl::convolution_forward::primitive_desc(d, engine());
  }
};

// A tensor's data as oneDNN memory in the layout `wanted`: the tensor itself when the layouts
// agree, else a reordered copy (`to_primitive`), or a scratch buffer to reorder back from after
// the primitive ran (`from_primitive`).
class Operand {
 public:
  Operand(const memory::desc& plain, const Tensor& t, const memory::desc& wanted)
      : user_(plain, engine(), t.raw_data()),
        mem_(plain == wanted ? user_ : memory(wanted, engine())) {}
  const memory& mem() const { return mem_; }
  void to_primitive(dnnl::stream& s) {
    if (mem_ != user_) dnnl::reorder(user_, mem_).execute(s, user_, mem_);
  }
  void from_primitive(dnnl::stream& s) {
    if (mem_ != user_) dnnl::reorder(mem_, user_).execute(s, mem_, user_);
  }

 private:
  memory user_, mem_;
};

}  // namespace

void conv2d_onednn(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out) {
  const ConvSetup c(input.shape(), weight.shape(), out.shape(), p, input.dtype());
  const auto pd = c.forward(bias.defined());
  dnnl::stream s(engine());
  Operand x(c.plain_src(c.src, input), input, pd.src_desc());
  Operand w(c.plain_weights(), weight, pd.weights_desc());
  Operand y(c.plain_src(c.dst, out), out, pd.dst_desc());
  x.to_primitive(s);
  w.to_primitive(s);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x.mem()}, {DNNL_ARG_WEIGHTS, w.mem()}, {DNNL_ARG_DST, y.mem()}};
  if (bias.defined()) {
    args[DNNL_ARG_BIAS] = memory(pd.bias_desc(), engine(), bias.raw_data());
  }
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
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, c.any(c.src),
                                            c.any(c.weights), c.any(c.dst), c.strides,
                                            c.dilates, c.pad, c.pad),
      engine(), hint);
}

dnnl::convolution_backward_weights::primitive_desc backward_weights(const ConvSetup& c,
                                                                    const ForwardPd& hint) {
  return dnnl::convolution_backward_weights::primitive_desc(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                               c.any(c.src), c.any(c.weights), c.any(c.dst),
                                               c.strides, c.dilates, c.pad, c.pad),
      engine(), hint);
}

// The passes given the output gradient already in the layout their primitive wants.
void run_backward_data(const ConvSetup& c,
                       const dnnl::convolution_backward_data::primitive_desc& pd,
                       const memory& dy, const Tensor& weight, const Tensor& grad_in,
                       dnnl::stream& s) {
  Operand w(c.plain_weights(), weight, pd.weights_desc());
  Operand dx(c.plain_src(c.src, grad_in), grad_in, pd.diff_src_desc());
  w.to_primitive(s);
  dnnl::convolution_backward_data(pd).execute(
      s, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w.mem()}, {DNNL_ARG_DIFF_SRC, dx.mem()}});
  dx.from_primitive(s);
}

void run_backward_weights(const ConvSetup& c,
                          const dnnl::convolution_backward_weights::primitive_desc& pd,
                          const memory& dy, const Tensor& input, const Tensor& grad_weight,
                          dnnl::stream& s) {
  Operand x(c.plain_src(c.src, input), input, pd.src_desc());
  Operand dw(c.plain_weights(), grad_weight, pd.diff_weights_desc());
  x.to_primitive(s);
  dnnl::convolution_backward_weights(pd).execute(
      s, {{DNNL_ARG_SRC, x.mem()}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw.mem()}});
  dw.from_primitive(s);
}

}  // namespace

void conv2d_backward_input_onednn(const Tensor& grad_out, const Tensor& weight,
                                  const Conv2dParams& p, const Tensor& grad_in) {
  const ConvSetup c(grad_in.shape(), weight.shape(), grad_out.shape(), p, weight.dtype());
  const auto pd = backward_data(c, c.forward(false));
  dnnl::stream s(engine());
  Operand dy(c.plain_src(c.dst, grad_out), grad_out, pd.diff_dst_desc());
  dy.to_primitive(s);
  run_backward_data(c, pd, dy.mem(), weight, grad_in, s);
  s.wait();
}

void conv2d_backward_weight_onednn(const Tensor& grad_out, const Tensor& input,
                                   const Conv2dParams& p, const Tensor& grad_weight) {
  const ConvSetup c(input.shape(), grad_weight.shape(), grad_out.shape(), p, input.dtype());
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
  const ConvSetup c(input.shape(), weight.shape(), grad_out.shape(), p, weight.dtype());
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
