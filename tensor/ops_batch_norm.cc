// Batch norm's front ends: batch_norm, and batch_norm_relu (the tail of a residual block:
// normalization, residual addition and ReLU in one pass), forward and backward. Both take
// [N, C, ...] as contiguous [N, C, S] (S = the spatial size), or channels-last inputs as NHWC
// [N, C, S] where the backend has such kernels (outputs and gradients then channels-last too),
// and keep per-channel tensors in the compute type (f32, or f64 for f64 inputs).
#include <algorithm>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {
// The kernels' layout for a call: channels-last when the input is NHWC (and not also
// contiguous) and the backend has channels-last batch norm kernels; else contiguous. Every
// [N, C, S] operand of the call is passed in it.
MemoryFormat layout_of(const Tensor& input) {
  if (input.is_channels_blocked() &&
      backend(input.device()).channels_blocked(ChannelsLastKernel::kBatchNorm, input.dtype())) {
    return MemoryFormat::kChannelsBlocked;
  }
  return detail::kernel_format(detail::is_nhwc(input), ChannelsLastKernel::kBatchNorm,
                               input.dtype(), input.device());
}

// [N, C, ...] -> [N, C, S], contiguous or (channels-last) strides [S*C, 1, C]; channels-blocked
// tensors stay [N, C, H, W] (no strides to view them with: the kernels take them 4-D).
Tensor as_ncs(const Tensor& x, MemoryFormat format) {
  if (format == MemoryFormat::kChannelsBlocked) return x.contiguous(format);
  return x.contiguous(format).view(
      {x.size(0), x.size(1), x.numel() / std::max<int64_t>(x.size(0) * x.size(1), 1)});
}

// Uninitialized [N, C, S] in the layout of the kernels' operand x.
Tensor empty_ncs(const Tensor& x, MemoryFormat format) {
  if (format == MemoryFormat::kContiguous) return empty(x.shape(), x.options());
  if (format == MemoryFormat::kChannelsBlocked) return empty(x.shape(), x.options(), format);
  return empty({x.size(0), x.size(2), x.size(1)}, x.options()).permute({0, 2, 1});
}

// A kernel's [N, C, S] operand as the caller's shape (channels-blocked ones have it already).
Tensor as_shape(const Tensor& t, const Shape& shape) {
  return t.is_channels_blocked() ? t : t.view(shape);
}

void check_channel_tensor(const Tensor& t, int64_t channels, const char* op, const char* what) {
  if (!t.defined()) return;
  TS_CHECK(t.dim() == 1 && t.size(0) == channels, op, ": ", what, " has shape ", t.shape(),
           ", expected [", channels, "]");
}

// A per-channel parameter as the kernels take it: contiguous, in the compute type.
Tensor channel_param(const Tensor& t, const TensorOptions& stat_options) {
  return t.defined() ? t.to(stat_options).contiguous() : Tensor();
}

// batch_norm (relu = false) and batch_norm_relu: checks the arguments, takes the statistics
// (the batch's in training, updating the running ones in place; the running ones in eval) and
// normalizes in one pass.
BatchNormResult normalize(const char* op, bool relu, const Tensor& input, const Tensor& weight,
                          const Tensor& bias, const Tensor& residual, const Tensor& running_mean,
                          const Tensor& running_var, bool training, double momentum,
                          double eps) {
  detail::check_defined(input, op);
  detail::check_floating(input, op);
  TS_CHECK(input.dim() >= 2, op, ": expected input [N, C, ...], got shape ", input.shape());
  TS_CHECK(eps > 0, op, ": eps must be positive, got ", eps);
  if (residual.defined()) {
    TS_CHECK(residual.shape() == input.shape() && residual.dtype() == input.dtype() &&
                 residual.device() == input.device(),
             op, ": the residual (", residual.shape(), " ", residual.dtype(), " on ",
             residual.device(), ") must match the input (", input.shape(), " ", input.dtype(),
             " on ", input.device(), ")");
  }
  const int64_t channels = input.size(1);
  check_channel_tensor(weight, channels, op, "weight");
  check_channel_tensor(bias, channels, op, "bias");
  check_channel_tensor(running_mean, channels, op, "running_mean");
  check_channel_tensor(running_var, channels, op, "running_var");
  const MemoryFormat format = layout_of(input);
  const Tensor x = as_ncs(input, format);
  const int64_t per_channel = input.numel() / std::max<int64_t>(channels, 1);
  const TensorOptions stat_options =
      TensorOptions(detail::compute_dtype(input.dtype())).device(input.device());
  Backend& be = backend(input.device());

  BatchNormResult result;
  if (training) {
    TS_CHECK(per_channel > 1, op, ": expected more than 1 value per channel when training, "
             "got input shape ", input.shape());
    result.mean = empty({channels}, stat_options);
    Tensor biased_var = empty({channels}, stat_options);
    be.batch_norm_stats(x, result.mean, biased_var);
    result.invstd = rsqrt(add(biased_var, eps));
    if (running_mean.defined()) {
      Tensor rm = running_mean;
      mul_(rm, 1.0 - momentum);
      add_(rm, result.mean, momentum);
    }
    if (running_var.defined()) {
      Tensor rv = running_var;
      mul_(rv, 1.0 - momentum);
      add_(rv, biased_var, momentum * static_cast<double>(per_channel) / (per_channel - 1));
    }
  } else {
    TS_CHECK(running_mean.defined() && running_var.defined(), op,
             ": eval mode needs running_mean and running_var");
    result.mean = running_mean.to(stat_options);
    result.invstd = rsqrt(add(running_var.to(stat_options), eps));
  }
  Tensor out = empty_ncs(x, format);
  const Tensor w = channel_param(weight, stat_options), b = channel_param(bias, stat_options);
  if (relu) {
    be.batch_norm_apply_relu(x, result.mean, result.invstd, w, b,
                             residual.defined() ? as_ncs(residual, format) : Tensor(), out);
  } else {
    be.batch_norm_apply(x, result.mean, result.invstd, w, b, out);
  }
  result.output = as_shape(out, input.shape());
  return result;
}
}  // namespace

BatchNormResult batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, bool training,
                           double momentum, double eps) {
  return normalize("batch_norm", false, input, weight, bias, Tensor(), running_mean,
                   running_var, training, momentum, eps);
}

BatchNormResult batch_norm_relu(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                const Tensor& residual, const Tensor& running_mean,
                                const Tensor& running_var, bool training, double momentum,
                                double eps) {
  return normalize("batch_norm_relu", true, input, weight, bias, residual, running_mean,
                   running_var, training, momentum, eps);
}

namespace {
// The gradients' tensors for batch_norm_backward and batch_norm_relu_backward, [N, C, S] as the
// kernels take them.
BatchNormGrads grad_buffers(const Tensor& x, MemoryFormat format, const Tensor& mean,
                            bool need_input, bool need_weight) {
  BatchNormGrads grads;
  if (need_input) grads.input = empty_ncs(x, format);
  if (need_weight) {
    grads.weight = empty({x.size(1)}, mean.options());
    grads.bias = empty({x.size(1)}, mean.options());
  }
  return grads;
}

// From the kernels' [N, C, S] and compute-type tensors to the caller's shape and dtypes.
void finish(BatchNormGrads* grads, const Tensor& input, const Tensor& weight) {
  if (grads->input.defined()) grads->input = as_shape(grads->input, input.shape());
  if (grads->weight.defined() && weight.defined()) {
    grads->weight = grads->weight.to(weight.dtype());
    grads->bias = grads->bias.to(weight.dtype());
  }
}
}  // namespace

BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                   const Tensor& weight, const Tensor& mean,
                                   const Tensor& invstd, bool training, bool need_input,
                                   bool need_weight) {
  TS_CHECK(grad_out.shape() == input.shape(), "batch_norm_backward: grad shape ",
           grad_out.shape(), " differs from input shape ", input.shape());
  const MemoryFormat format = layout_of(input);
  const Tensor x = as_ncs(input, format);
  BatchNormGrads grads = grad_buffers(x, format, mean, need_input, need_weight);
  backend(input.device())
      .batch_norm_backward(as_ncs(grad_out.to(input.dtype()), format), x, mean, invstd,
                           channel_param(weight, mean.options()), training, grads.input,
                           grads.weight, grads.bias);
  finish(&grads, input, weight);
  return grads;
}

BatchNormReluGrads batch_norm_relu_backward(const Tensor& grad_out, const Tensor& output,
                                            const Tensor& input, const Tensor& weight,
                                            const Tensor& mean, const Tensor& invstd,
                                            bool training, bool need_input, bool need_weight,
                                            bool need_residual) {
  TS_CHECK(grad_out.shape() == input.shape() && output.shape() == input.shape(),
           "batch_norm_relu_backward: grad shape ", grad_out.shape(), " and output shape ",
           output.shape(), " must equal the input shape ", input.shape());
  const MemoryFormat format = layout_of(input);
  const Tensor x = as_ncs(input, format);
  BatchNormGrads grads = grad_buffers(x, format, mean, need_input, need_weight);
  Tensor grad_residual = need_residual ? empty_ncs(x, format) : Tensor();
  backend(input.device())
      .batch_norm_relu_backward(as_ncs(grad_out.to(input.dtype()), format),
                                as_ncs(output, format), x, mean,
                                invstd, channel_param(weight, mean.options()), training,
                                grads.input, grads.weight, grads.bias, grad_residual);
  finish(&grads, input, weight);
  return {grads.input, grads.weight, grads.bias,
          need_residual ? as_shape(grad_residual, input.shape()) : Tensor()};
}

}  // namespace tessera
