// Neural-network kernels' front ends: softmax, convolution, pooling (batch norm: ops_batch_norm.cc).
#include <cmath>

#include "tensor/accelerator.h"
#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

// Softmax over `dim`: moves that dim last (a copy unless it already is) and runs the kernel on
// the [rows, n] matrix.
Tensor softmax_impl(const Tensor& a_in, int64_t dim, bool log, const char* op) {
  detail::check_defined(a_in, op);
  const Tensor a = detail::strided(a_in);
  detail::check_floating(a, op);
  if (a.dim() == 0) return softmax_impl(a.reshape({1}), 0, log, op).reshape({});
  dim = wrap_dim(dim, a.dim(), op);
  const int64_t last = a.dim() - 1, n = a.size(dim);
  const Tensor moved = a.transpose(dim, last).contiguous();
  Tensor out = empty(moved.shape(), moved.options());
  if (out.numel() > 0) {
    backend(a.device()).softmax(moved.view({-1, n}), out.view({-1, n}), log);
  }
  return out.transpose(dim, last).contiguous();
}

void check_nchw(const Tensor& t, const char* op, const char* what) {
  detail::check_defined(t, op, what);
  TS_CHECK(t.dim() == 4, op, ": expected a 4-D ", what, " [N, C, H, W], got shape ", t.shape());
}

void check_pool(const Tensor& input, const Pool2dParams& p, const char* op) {
  check_nchw(input, op, "input");
  detail::check_floating(input, op);
  for (int i = 0; i < 2; ++i) {
    TS_CHECK(p.kernel[i] > 0 && p.stride[i] > 0, op, ": kernel and stride must be positive, got ",
             "kernel [", p.kernel[0], ", ", p.kernel[1], "] stride [", p.stride[0], ", ",
             p.stride[1], "]");
    TS_CHECK(p.padding[i] >= 0 && p.padding[i] * 2 <= p.kernel[i], op,
             ": padding should be at most half the kernel, got padding [", p.padding[0], ", ",
             p.padding[1], "] for kernel [", p.kernel[0], ", ", p.kernel[1], "]");
  }
}

Shape pool_output_shape(const Tensor& input, const Pool2dParams& p, const char* op) {
  const int64_t oh = window_output_size(input.size(2), p.kernel[0], p.stride[0], p.padding[0]);
  const int64_t ow = window_output_size(input.size(3), p.kernel[1], p.stride[1], p.padding[1]);
  TS_CHECK(oh > 0 && ow > 0, op, ": input ", input.shape(), " is too small for kernel [",
           p.kernel[0], ", ", p.kernel[1], "] (output would be ", oh, "x", ow, ")");
  return {input.size(0), input.size(1), oh, ow};
}

}  // namespace

// ---------------------------------------------------------------------------- softmax

Tensor softmax(const Tensor& a, int64_t dim) { return softmax_impl(a, dim, false, "softmax"); }

Tensor log_softmax(const Tensor& a, int64_t dim) {
  return softmax_impl(a, dim, true, "log_softmax");
}

namespace {
Tensor softmax_backward_impl(const Tensor& grad_out_in, const Tensor& out_in, int64_t dim,
                             bool log, const char* op) {
  detail::check_defined(grad_out_in, op, "grad");
  detail::check_defined(out_in, op, "output");
  const Tensor grad_out = detail::strided(grad_out_in), out = detail::strided(out_in);
  TS_CHECK(grad_out.shape() == out.shape(), op, ": grad shape ", grad_out.shape(),
           " differs from output shape ", out.shape());
  detail::check_same_device(grad_out, out, op);
  if (out.dim() == 0) {
    return softmax_backward_impl(grad_out.reshape({1}), out.reshape({1}), 0, log, op).reshape({});
  }
  dim = wrap_dim(dim, out.dim(), op);
  const int64_t last = out.dim() - 1, n = out.size(dim);
  const Tensor y = out.transpose(dim, last).contiguous();
  const Tensor g = grad_out.to(out.dtype()).transpose(dim, last).contiguous();
  Tensor grad_in = empty(y.shape(), y.options());
  if (grad_in.numel() > 0) {
    backend(out.device())
        .softmax_backward(g.view({-1, n}), y.view({-1, n}), grad_in.view({-1, n}), log);
  }
  return grad_in.transpose(dim, last).contiguous();
}
}  // namespace

namespace {
// The targets as contiguous i64 [N], checked against the [N, C] scores.
Tensor checked_targets(const Tensor& scores, const Tensor& target, const char* op) {
  detail::check_defined(scores, op, "logits");
  detail::check_floating(scores, op);
  TS_CHECK(scores.dim() == 2, op, ": expected logits [N, C], got shape ", scores.shape());
  detail::check_defined(target, op, "target");
  TS_CHECK(target.dim() == 1 && target.size(0) == scores.size(0), op, ": expected target [",
           scores.size(0), "] of class indices, got shape ", target.shape());
  TS_CHECK(target.dtype() == kI64 || target.dtype() == kI32, op,
           ": target must hold class indices (i64 or i32), got ", target.dtype());
  detail::check_same_device(scores, target, op);
  if (target.numel() > 0) {
    const int64_t lo = static_cast<int64_t>(amin(target).item());
    const int64_t hi = static_cast<int64_t>(amax(target).item());
    TS_CHECK(lo >= 0 && hi < scores.size(1), op, ": target class out of range: values span [",
             lo, ", ", hi, "] but there are ", scores.size(1), " classes");
  }
  return target.to(kI64).contiguous();
}
}  // namespace

CrossEntropyRows cross_entropy_rows(const Tensor& logits, const Tensor& target,
                                    double label_smoothing) {
  const Tensor y = checked_targets(logits, target, "cross_entropy");
  TS_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
           "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  TS_CHECK(logits.size(1) > 0 || logits.size(0) == 0, "cross_entropy: no classes (logits ",
           logits.shape(), ")");
  const Tensor x = logits.contiguous();
  CrossEntropyRows r{empty({x.size(0)}, x.options()), empty(x.shape(), x.options())};
  if (x.numel() > 0) backend(x.device()).cross_entropy(x, y, label_smoothing, r.log_probs, r.loss);
  return r;
}

Tensor cross_entropy_rows_backward(const Tensor& log_probs, const Tensor& target,
                                   const Tensor& row_grad, double label_smoothing) {
  const Tensor y = checked_targets(log_probs, target, "cross_entropy_backward");
  detail::check_defined(row_grad, "cross_entropy_backward", "row_grad");
  detail::check_same_device(log_probs, row_grad, "cross_entropy_backward");
  const int64_t n = log_probs.size(0);
  TS_CHECK(row_grad.numel() == n || row_grad.numel() == 1, "cross_entropy_backward: row_grad has ",
           row_grad.numel(), " elements, expected ", n, " or 1");
  const Tensor g = row_grad.to(log_probs.dtype()).reshape({-1}).expand({n}).contiguous();
  const Tensor lp = log_probs.contiguous();
  Tensor grad = empty(lp.shape(), lp.options());
  if (grad.numel() > 0) {
    backend(lp.device()).cross_entropy_backward(lp, y, g, label_smoothing, grad);
  }
  return grad;
}

Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad_out, out, dim, false, "softmax_backward");
}

Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad_out, out, dim, true, "log_softmax_backward");
}

// ---------------------------------------------------------------------------- conv2d

namespace {
Shape conv_output_shape(const Shape& in, const Shape& w, const Conv2dParams& p) {
  const int64_t oh = window_output_size(in[2], w[2], p.stride[0], p.padding[0], p.dilation[0]);
  const int64_t ow = window_output_size(in[3], w[3], p.stride[1], p.padding[1], p.dilation[1]);
  return {in[0], w[0], oh, ow};
}

void check_conv(const Shape& in, const Shape& w, const Conv2dParams& p, const char* op) {
  for (int i = 0; i < 2; ++i) {
    TS_CHECK(p.stride[i] > 0 && p.dilation[i] > 0 && p.padding[i] >= 0, op,
             ": stride and dilation must be positive and padding non-negative, got stride [",
             p.stride[0], ", ", p.stride[1], "] padding [", p.padding[0], ", ", p.padding[1],
             "] dilation [", p.dilation[0], ", ", p.dilation[1], "]");
  }
  TS_CHECK(p.groups > 0, op, ": groups must be positive, got ", p.groups);
  TS_CHECK(in.size() == 4 && w.size() == 4, op, ": expected 4-D input and weight, got ", in,
           " and ", w);
  TS_CHECK(in[1] % p.groups == 0 && w[0] % p.groups == 0, op, ": ", in[1], " input and ", w[0],
           " output channels must both be divisible by groups = ", p.groups);
  TS_CHECK(w[1] * p.groups == in[1], op, ": weight ", w, " expects ", w[1] * p.groups,
           " input channels (groups = ", p.groups, "), but input ", in, " has ", in[1]);
  const Shape out = conv_output_shape(in, w, p);
  TS_CHECK(out[2] > 0 && out[3] > 0, op, ": input ", in, " is too small for kernel ", w,
           " with padding [", p.padding[0], ", ", p.padding[1], "] (output would be ", out[2],
           "x", out[3], ")");
}

// A convolution's activations are channels-last when it asks for that, is given an NHWC
// tensor, or its kernels run fastest so (Backend::prefers_channels_last, where
// allow_preferred_layout()), and the backend has the kernels; else NCHW.
MemoryFormat conv_format(const Conv2dParams& p, std::initializer_list<Tensor> activations,
                         DType dtype, Device device) {
  // Channels-blocked (nChw16c) first: asked for, or given, and the backend has the kernels.
  bool blocked = p.channels_blocked;
  for (const Tensor& t : activations) blocked = blocked || (t.defined() && t.is_channels_blocked());
  if (blocked && backend(device).channels_blocked(ChannelsLastKernel::kConv2d, dtype)) {
    return MemoryFormat::kChannelsBlocked;
  }
  bool nhwc = p.channels_last ||
              (allow_preferred_layout() &&
               backend(device).prefers_channels_last(ChannelsLastKernel::kConv2d, dtype));
  for (const Tensor& t : activations) nhwc = nhwc || (t.defined() && detail::is_nhwc(t));
  return detail::kernel_format(nhwc, ChannelsLastKernel::kConv2d, dtype, device);
}

// One activation's layout in a convolution laid out as `format`: channels-blocked takes whole
// blocks of 16 channels, so an RGB image (the stem's input) stays NCHW.
MemoryFormat activation_format(MemoryFormat format, int64_t channels) {
  return format == MemoryFormat::kChannelsBlocked && channels % 16 != 0 ? MemoryFormat::kContiguous
                                                                         : format;
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dParams& params) {
  check_nchw(input, "conv2d", "input");
  check_nchw(weight, "conv2d", "weight");
  detail::check_floating(input, "conv2d");
  detail::check_same_device(input, weight, "conv2d");
  TS_CHECK(input.dtype() == weight.dtype(), "conv2d: input is ", input.dtype(), " but weight is ",
           weight.dtype());
  check_conv(input.shape(), weight.shape(), params, "conv2d");
  if (bias.defined()) {
    TS_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "conv2d: bias shape ",
             bias.shape(), " does not match ", weight.size(0), " output channels");
    detail::check_same_device(input, bias, "conv2d");
  }
  const MemoryFormat format = conv_format(params, {input}, input.dtype(), input.device());
  Tensor out = empty(conv_output_shape(input.shape(), weight.shape(), params), input.options(),
                     activation_format(format, weight.size(0)));
  backend(input.device())
      .conv2d(input.contiguous(activation_format(format, input.size(1))), weight.contiguous(),
              bias.defined() ? bias.to(input.dtype()).contiguous() : Tensor(), params, out);
  return out;
}

Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                             const Shape& input_shape, const Conv2dParams& params) {
  check_conv(input_shape, weight.shape(), params, "conv2d_backward_input");
  const Shape expected = conv_output_shape(input_shape, weight.shape(), params);
  TS_CHECK(grad_out.shape() == expected, "conv2d_backward_input: grad shape ", grad_out.shape(),
           " differs from the output shape ", expected);
  const MemoryFormat format = conv_format(params, {grad_out}, weight.dtype(), weight.device());
  Tensor grad_in = empty(input_shape, weight.options(), activation_format(format, input_shape[1]));
  backend(weight.device())
      .conv2d_backward_input(
          grad_out.to(weight.dtype()).contiguous(activation_format(format, grad_out.size(1))),
          weight.contiguous(), params, grad_in);
  return grad_in;
}

Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                              const Shape& weight_shape, const Conv2dParams& params) {
  check_conv(input.shape(), weight_shape, params, "conv2d_backward_weight");
  const Shape expected = conv_output_shape(input.shape(), weight_shape, params);
  TS_CHECK(grad_out.shape() == expected, "conv2d_backward_weight: grad shape ",
           grad_out.shape(), " differs from the output shape ", expected);
  Tensor grad_w = empty(weight_shape, input.options());
  const MemoryFormat format =
      conv_format(params, {grad_out, input}, input.dtype(), input.device());
  backend(input.device())
      .conv2d_backward_weight(
          grad_out.to(input.dtype()).contiguous(activation_format(format, grad_out.size(1))),
          input.contiguous(activation_format(format, input.size(1))), params, grad_w);
  return grad_w;
}

std::pair<Tensor, Tensor> conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                          const Tensor& weight, const Shape& input_shape,
                                          const Conv2dParams& params, bool need_input,
                                          bool need_weight) {
  check_conv(input_shape, weight.shape(), params, "conv2d_backward");
  const Shape expected = conv_output_shape(input_shape, weight.shape(), params);
  TS_CHECK(grad_out.shape() == expected, "conv2d_backward: grad shape ", grad_out.shape(),
           " differs from the output shape ", expected);
  if (need_weight) {
    TS_CHECK(input.defined() && input.shape() == input_shape, "conv2d_backward: the weight ",
             "gradient needs the input, of shape ", input_shape);
    TS_CHECK(input.dtype() == weight.dtype(), "conv2d_backward: input is ", input.dtype(),
             " but weight is ", weight.dtype());
    detail::check_same_device(input, weight, "conv2d_backward");
  }
  const MemoryFormat format = conv_format(params, {grad_out, need_weight ? input : Tensor()},
                                          weight.dtype(), weight.device());
  const MemoryFormat in_format = activation_format(format, input_shape[1]);
  const Tensor grad_in = need_input ? empty(input_shape, weight.options(), in_format) : Tensor();
  const Tensor grad_w = need_weight ? empty(weight.shape(), weight.options()) : Tensor();
  if (need_input || need_weight) {
    backend(weight.device())
        .conv2d_backward(
            grad_out.to(weight.dtype()).contiguous(activation_format(format, grad_out.size(1))),
            need_weight ? input.contiguous(in_format) : Tensor(), weight.contiguous(), params,
            grad_in, grad_w);
  }
  return {grad_in, grad_w};
}

// ---------------------------------------------------------------------------- pooling

namespace {
// Max pooling keeps a channels-blocked input so (output and indices too) where the backend's
// channels-last kernel runs on each block of 16 channels (blocks_as_nhwc). Not for 1x1 maps:
// their NHWC view is contiguous too, so the backend would take the NCHW kernel for it while a
// padded output's view is NHWC.
bool pools_blocked(const Tensor& t) {
  Backend& be = backend(t.device());
  return t.is_channels_blocked() && t.size(2) * t.size(3) > 1 &&
         be.channels_blocked(ChannelsLastKernel::kMaxPool2d, t.dtype()) &&
         be.channels_last(ChannelsLastKernel::kMaxPool2d, t.dtype());
}
}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Pool2dParams& p) {
  check_pool(input, p, "max_pool2d");
  const Shape shape = pool_output_shape(input, p, "max_pool2d");
  if (pools_blocked(input)) {
    const auto blocked = MemoryFormat::kChannelsBlocked;
    Tensor out = empty(shape, input.options(), blocked);
    Tensor indices = empty(shape, TensorOptions(kI64).device(input.device()), blocked);
    backend(input.device())
        .max_pool2d(detail::blocks_as_nhwc(input), p, detail::blocks_as_nhwc(out),
                    detail::blocks_as_nhwc(indices));
    return {out, indices};
  }
  const MemoryFormat format = detail::kernel_format(
      detail::is_nhwc(input), ChannelsLastKernel::kMaxPool2d, input.dtype(), input.device());
  Tensor out = empty(shape, input.options(), format);
  Tensor indices = empty(shape, TensorOptions(kI64).device(input.device()), format);
  backend(input.device()).max_pool2d(input.contiguous(format), p, out, indices);
  return {out, indices};
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                           const Shape& input_shape) {
  TS_CHECK(grad_out.shape() == indices.shape(), "max_pool2d_backward: grad shape ",
           grad_out.shape(), " differs from indices shape ", indices.shape());
  if (indices.is_channels_blocked()) {  // from a channels-blocked forward (pools_blocked)
    const auto blocked = MemoryFormat::kChannelsBlocked;
    Tensor grad_in = empty(input_shape, grad_out.options(), blocked);  // the backend zeroes it
    backend(grad_out.device())
        .max_pool2d_backward(detail::blocks_as_nhwc(grad_out.contiguous(blocked)),
                             detail::blocks_as_nhwc(indices), detail::blocks_as_nhwc(grad_in));
    return grad_in;
  }
  // NHWC indices come from an NHWC forward.
  const MemoryFormat format =
      detail::kernel_format(detail::is_nhwc(indices), ChannelsLastKernel::kMaxPool2d,
                            grad_out.dtype(), grad_out.device());
  Tensor grad_in = empty(input_shape, grad_out.options(), format);  // the backend zeroes it
  backend(grad_out.device())
      .max_pool2d_backward(grad_out.contiguous(format), indices.contiguous(format), grad_in);
  return grad_in;
}

Tensor avg_pool2d(const Tensor& input, const Pool2dParams& p) {
  check_pool(input, p, "avg_pool2d");
  Tensor out = empty(pool_output_shape(input, p, "avg_pool2d"), input.options());
  backend(input.device()).avg_pool2d(input.contiguous(), p, out);
  return out;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape,
                           const Pool2dParams& p) {
  Tensor grad_in = zeros(input_shape, grad_out.options());
  TS_CHECK(grad_out.shape() == pool_output_shape(grad_in, p, "avg_pool2d_backward"),
           "avg_pool2d_backward: grad shape ", grad_out.shape(), " does not match input ",
           input_shape);
  backend(grad_out.device()).avg_pool2d_backward(grad_out.contiguous(), p, grad_in);
  return grad_in;
}

Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size) {
  check_nchw(input, "adaptive_avg_pool2d", "input");
  detail::check_floating(input, "adaptive_avg_pool2d");
  TS_CHECK(output_size[0] > 0 && output_size[1] > 0, "adaptive_avg_pool2d: output size [",
           output_size[0], ", ", output_size[1], "] must be positive");
  TS_CHECK(input.size(2) > 0 && input.size(3) > 0, "adaptive_avg_pool2d: empty input plane ",
           input.shape());
  Tensor out = empty({input.size(0), input.size(1), output_size[0], output_size[1]},
                     input.options());
  backend(input.device()).adaptive_avg_pool2d(input.contiguous(), out);
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_shape) {
  TS_CHECK(grad_out.dim() == 4 && input_shape.size() == 4 &&
               grad_out.size(0) == input_shape[0] && grad_out.size(1) == input_shape[1],
           "adaptive_avg_pool2d_backward: grad ", grad_out.shape(), " does not match input ",
           input_shape);
  Tensor grad_in = empty(input_shape, grad_out.options());
  backend(grad_out.device()).adaptive_avg_pool2d_backward(grad_out.contiguous(), grad_in);
  return grad_in;
}

}  // namespace tessera
