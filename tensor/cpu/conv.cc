// The CPU backend's convolutions: which kernel runs each pass.
//
// f32: oneDNN's primitives for the shapes conv_path.h names (among them Winograd's F(4x4, 3x3)
// for 3x3 layers of 32-256 channels at stride 1, where allow_winograd()), tessera's direct 3x3
// kernels (direct_conv3x3.h) where they apply, im2col + GEMM (conv_im2col.h) for everything
// else; at stride 1 the input gradient is itself a convolution (of dy with flipped weights) and
// takes the same choice. Channels-last f32 tensors (Backend::channels_last) run oneDNN's
// primitives in every pass: the direct ones on NHWC as it is, Winograd's on nChw16c, reordered;
// so do channels-blocked ones (Backend::channels_blocked), in every primitive's own layout.
// f64 always runs im2col + GEMM. bf16 goes to oneDNN's bf16 primitives where the CPU computes
// bf16 natively (conv_onednn.h), but for the backward passes on channels-last activations that
// run faster as matmuls (conv_nhwc_matmul.h: both passes of 1x1 layers, and the weight gradients
// of strided layers and small maps).
//
// f16, and bf16 elsewhere, follow the f32 route exactly: the direct and im2col kernels take
// half-precision tensors and convert inside (planes as they are padded, tasks of images), and
// oneDNN's f32 primitives convert in the reorders into and out of their layouts
// (conv_onednn.h), so each gives the f32 result on the widened values, rounded once, without
// widening whole tensors. Only the stride-2 direct input gradient, which is f32 only, runs on
// widened copies (in_f32).
#include <initializer_list>
#include <vector>

#include "tensor/cpu/conv_im2col.h"
#include "tensor/cpu/conv_nhwc_matmul.h"
#include "tensor/cpu/conv_onednn.h"
#include "tensor/cpu/conv_path.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/direct_conv3x3.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/gemm_onednn.h"

namespace tessera {
namespace cpu {

namespace {

// f16/bf16: run the f32 route on widened copies.
template <typename F>
void in_f32(const std::vector<Tensor>& inputs, const Tensor& out, F f) {
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(t.defined() ? t.to(kF32) : Tensor());
  Tensor out32 = empty(out.shape(), kF32);
  f(wide, out32);
  Tensor(out).copy_(out32);  // converts back to out's dtype
}

bool native_bf16(DType t) { return t == kBF16 && onednn_bf16_available(); }

// Convolutions that run oneDNN's primitives whatever their shape: bf16 on CPUs that compute it,
// and f32 with any channels-last or channels-blocked activation (oneDNN reads and writes NHWC
// and nChw16c as they are; the direct and im2col kernels are NCHW). One activation may be contiguous while another is not: a
// 1-channel input is both NCHW and NHWC, its output NHWC only.
bool all_on_onednn(DType t, std::initializer_list<const Tensor*> activations) {
  return native_bf16(t) ||
         (t == kF32 && (any_nhwc(activations) || any_channels_blocked(activations)));
}

// True when this pass's f32 route is oneDNN's f32 primitives (never for f64).
bool on_onednn_f32(DType t, ConvPass pass, const Shape& input, const Shape& weight,
                   const Conv2dParams& p) {
  return t != kF64 && (conv_uses_onednn(pass, input, weight, p) ||
                       conv_uses_winograd(input, weight, p));
}

bool direct_applies(int64_t out_channels, const Shape& weight, const Conv2dParams& p) {
  return direct_conv3x3_applies(out_channels, weight[2], weight[3], p.stride[0], p.stride[1],
                                p.padding[0], p.padding[1], p.dilation[0], p.dilation[1],
                                p.groups);
}

// The stride-2 input gradient of a direct convolution (its channels c are the vector lanes).
bool input_grad_runs_direct_stride2(const Shape& grad_in, const Shape& weight,
                                    const Conv2dParams& p) {
  return p.stride[0] == 2 && direct_applies(grad_in[1], weight, p);
}

// The direct kernel on x and y of type T (f16/bf16: weights and bias widened, they are small).
template <typename T>
void run_direct_conv3x3(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out) {
  const Tensor w32 = weight.to(kF32), b32 = bias.defined() ? bias.to(kF32) : Tensor();
  direct_conv3x3(input.data<T>(), w32.data<float>(), b32.defined() ? b32.data<float>() : nullptr,
                 out.data<T>(), input.size(0), input.size(1), weight.size(0), input.size(2),
                 input.size(3), static_cast<int>(p.stride[0]));
}

// The direct weight gradient of dy and x of type T, into the f32 tensor dw.
template <typename T>
void run_direct_weight_grad(const Tensor& grad_out, const Tensor& input, const Conv2dParams& p,
                            const Tensor& dw) {
  direct_conv3x3_backward_weight(grad_out.data<T>(), input.data<T>(), dw.data<float>(),
                                 input.size(0), input.size(1), dw.size(0), input.size(2),
                                 input.size(3), static_cast<int>(p.stride[0]));
}

// With stride 1 the input gradient is itself a convolution: of dy with the weights flipped in
// space and with input and output channels swapped, W'[c, o, i, j] = W[o, c, kh-1-i, kw-1-j],
// padded by d(k-1) - p. That reuses the forward kernels (im2col, which only copies, instead of
// col2im, which scatters and adds) and writes dx directly.
template <typename T>
Tensor flip_and_swap_channels(const Tensor& weight) {
  const int64_t o = weight.size(0), c = weight.size(1), kh = weight.size(2), kw = weight.size(3);
  Tensor out = empty({c, o, kh, kw}, weight.dtype());
  const T* w = weight.data<T>();
  T* f = out.data<T>();
  // Written in order, read strided (strided writes cost more than strided reads).
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          f[((ic * o + oc) * kh + i) * kw + j] = w[((oc * c + ic) * kh + (kh - 1 - i)) * kw + (kw - 1 - j)];
  return out;
}

Tensor flipped_weight(const Tensor& weight) {
  Tensor out;
  TS_DISPATCH_FLOATING(weight.dtype(), "conv2d_backward_input",
                       [&] { out = flip_and_swap_channels<scalar_t>(weight); });
  return out;
}

// The flipped convolution's parameters: padded by d(k-1) - p.
Conv2dParams flipped_params(const Conv2dParams& p, const Shape& weight) {
  Conv2dParams q = p;
  q.padding = {p.dilation[0] * (weight[2] - 1) - p.padding[0],
               p.dilation[1] * (weight[3] - 1) - p.padding[1]};
  return q;
}

// A 1x1 kernel is left to im2col + GEMM: W^T . dy is the input gradient itself, with no
// flipped copy of the weights to make and no col2im.
bool backward_input_as_convolution(const Conv2dParams& p, const Shape& weight) {
  return weight[2] * weight[3] > 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.groups == 1 &&
         p.padding[0] <= p.dilation[0] * (weight[2] - 1) &&
         p.padding[1] <= p.dilation[1] * (weight[3] - 1);
}

}  // namespace

void CpuBackend::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out) {
  const DType t = input.dtype();
  if (all_on_onednn(t, {&input, &out}) ||
      on_onednn_f32(t, ConvPass::kForward, input.shape(), weight.shape(), p)) {
    return conv2d_onednn(input, weight, bias, p, out);
  }
  if (t != kF64 && direct_applies(weight.size(0), weight.shape(), p)) {
    if (t == kF32) {
      return direct_conv3x3(input.data<float>(), weight.data<float>(),
                            bias.defined() ? bias.data<float>() : nullptr, out.data<float>(),
                            input.size(0), input.size(1), weight.size(0), input.size(2),
                            input.size(3), static_cast<int>(p.stride[0]));
    }
    if (t == kF16) return run_direct_conv3x3<Half>(input, weight, bias, p, out);
    return run_direct_conv3x3<BFloat16>(input, weight, bias, p, out);
  }
  im2col_conv2d(input, weight, bias, p, out);
}

void CpuBackend::conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                                       const Conv2dParams& p, const Tensor& grad_in) {
  const DType t = weight.dtype();
  if (conv_backward_input_as_matmul(t, weight.shape(), p, {&grad_out, &grad_in})) {
    return conv_backward_input_matmul(grad_out, weight, p, grad_in);
  }
  if (all_on_onednn(t, {&grad_out, &grad_in}) ||
      on_onednn_f32(t, ConvPass::kBackwardInput, grad_in.shape(), weight.shape(), p)) {
    return conv2d_backward_input_onednn(grad_out, weight, p, grad_in);
  }
  if (backward_input_as_convolution(p, weight.shape())) {
    return conv2d(grad_out, flipped_weight(weight), Tensor(), flipped_params(p, weight.shape()),
                  grad_in);
  }
  if (t != kF64 && input_grad_runs_direct_stride2(grad_in.shape(), weight.shape(), p)) {
    if (t == kF32) {
      return direct_conv3x3_backward_input_stride2(grad_out.data<float>(), weight.data<float>(),
                                                   grad_in.data<float>(), grad_in.size(0),
                                                   grad_in.size(1), weight.size(0),
                                                   grad_in.size(2), grad_in.size(3));
    }
    return in_f32({grad_out, weight}, grad_in, [&](const std::vector<Tensor>& v, const Tensor& o) {
      conv2d_backward_input(v[0], v[1], p, o);
    });
  }
  im2col_conv2d_backward_input(grad_out, weight, p, grad_in);
}

void CpuBackend::conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                                        const Conv2dParams& p, const Tensor& grad_weight) {
  const DType t = input.dtype();
  if (conv_backward_weight_as_matmul(t, input.shape(), grad_weight.shape(), p,
                                     {&grad_out, &input})) {
    return conv_backward_weight_matmul(grad_out, input, p, grad_weight);
  }
  if (all_on_onednn(t, {&grad_out, &input}) ||
      on_onednn_f32(t, ConvPass::kBackwardWeight, input.shape(), grad_weight.shape(), p)) {
    return conv2d_backward_weight_onednn(grad_out, input, p, grad_weight);
  }
  // The direct kernel takes any channel counts for the weight gradient.
  if (t != kF64 && direct_applies(8, grad_weight.shape(), p)) {
    if (t == kF32) return run_direct_weight_grad<float>(grad_out, input, p, grad_weight);
    // f16/bf16 read their half-precision dy and x; the f32 sums are rounded once.
    const Tensor dw = empty(grad_weight.shape(), kF32);
    if (t == kF16) {
      run_direct_weight_grad<Half>(grad_out, input, p, dw);
    } else {
      run_direct_weight_grad<BFloat16>(grad_out, input, p, dw);
    }
    Tensor(grad_weight).copy_(dw);
    return;
  }
  im2col_conv2d_backward_weight(grad_out, input, p, grad_weight);
}

void CpuBackend::conv2d_backward(const Tensor& grad_out, const Tensor& input,
                                 const Tensor& weight, const Conv2dParams& p,
                                 const Tensor& grad_in, const Tensor& grad_weight) {
  if (!grad_in.defined() || !grad_weight.defined()) {
    return Backend::conv2d_backward(grad_out, input, weight, p, grad_in, grad_weight);
  }
  const DType t = weight.dtype();
  // bf16 on channels-last: a pass that runs as a matmul runs alone (conv_nhwc_matmul.h).
  if (conv_backward_input_as_matmul(t, weight.shape(), p, {&grad_out, &input, &grad_in}) ||
      conv_backward_weight_as_matmul(t, input.shape(), weight.shape(), p,
                                     {&grad_out, &input, &grad_in})) {
    return Backend::conv2d_backward(grad_out, input, weight, p, grad_in, grad_weight);
  }
  const bool input_on_onednn =
      on_onednn_f32(t, ConvPass::kBackwardInput, grad_in.shape(), weight.shape(), p);
  const bool weight_on_onednn =
      on_onednn_f32(t, ConvPass::kBackwardWeight, input.shape(), weight.shape(), p);
  if (all_on_onednn(t, {&grad_out, &input, &grad_in}) || (input_on_onednn && weight_on_onednn)) {
    return conv2d_backward_onednn(grad_out, input, weight, p, grad_in, grad_weight);
  }
  // Each pass alone: those on tessera's kernels read dy in half precision (the direct kernels)
  // or widen it a task at a time (im2col), and oneDNN's convert it in their reorders, so only
  // the stride-2 direct input gradient widens the whole of it.
  Backend::conv2d_backward(grad_out, input, weight, p, grad_in, grad_weight);
}

}  // namespace cpu
}  // namespace tessera
