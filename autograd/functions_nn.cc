// Differentiable neural-network ops: convolution, pooling, softmax, batch norm (and batch norm
// + ReLU, a residual block's fused tail), dropout.
#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"
#include "autograd/weight_grad.h"

namespace tessera {

Variable conv2d(const Variable& input_in, const Variable& weight_in, const Variable& bias_in,
                const Conv2dParams& params) {
  const auto in = autocast_args("conv2d", input_in, weight_in, bias_in);
  const Variable &input = in[0], &weight = in[1], &bias = in[2];
  Tensor out = conv2d(input.data(), weight.data(), bias.defined() ? bias.data() : Tensor(), params);
  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape input_shape = input.shape();
  const Tensor x = need_w ? input.data() : Tensor();
  const Variable w = weight;  // read at backward time (ZeRO-3 re-gathers it)
  // B: the input's gradient; W (deferred under a WeightGradStore): the weight's and bias's.
  // Not deferred, both in one call, which prepares the output gradient once.
  return record_split(
      "Conv2dBackward", out, {input, weight, bias},
      [need_x, w, input_shape, params](const Tensor& g) -> Grads {
        return {need_x ? conv2d_backward_input(g, w.data(), input_shape, params) : Tensor(),
                Tensor(), Tensor()};
      },
      [need_w, need_b, x, w, params](const Tensor& g) -> Grads {
        Tensor gw, gb;
        if (need_w) gw = conv2d_backward_weight(g, x, w.shape(), params);
        if (need_b) gb = sum(g, {0, 2, 3});
        return {Tensor(), gw, gb};
      },
      x.defined() ? static_cast<int64_t>(x.nbytes()) : 0,
      [need_x, need_w, need_b, x, w, input_shape, params](const Tensor& g) -> Grads {
        auto [gx, gw] = conv2d_backward(g, x, w.data(), input_shape, params, need_x, need_w);
        return {gx, gw, need_b ? sum(g, {0, 2, 3}) : Tensor()};
      });
}

Variable max_pool2d(const Variable& input, const Pool2dParams& params) {
  auto [out, indices] = max_pool2d_with_indices(input.data(), params);
  const Shape input_shape = input.shape();
  return record("MaxPool2dBackward", out, {input},
                [indices = indices, input_shape](const Tensor& g) -> Grads {
                  return {max_pool2d_backward(g, indices, input_shape)};
                });
}

Variable avg_pool2d(const Variable& input, const Pool2dParams& params) {
  const Shape input_shape = input.shape();
  return record("AvgPool2dBackward", avg_pool2d(input.data(), params), {input},
                [input_shape, params](const Tensor& g) -> Grads {
                  return {avg_pool2d_backward(g, input_shape, params)};
                });
}

Variable adaptive_avg_pool2d(const Variable& input, std::array<int64_t, 2> output_size) {
  const Shape input_shape = input.shape();
  return record("AdaptiveAvgPool2dBackward", adaptive_avg_pool2d(input.data(), output_size),
                {input}, [input_shape](const Tensor& g) -> Grads {
                  return {adaptive_avg_pool2d_backward(g, input_shape)};
                });
}

Variable softmax(const Variable& a_in, int64_t dim) {
  const Variable a = autocast_args("softmax", a_in)[0];
  const Tensor y = softmax(a.data(), dim);
  return record("SoftmaxBackward", y, {a},
                [y, dim](const Tensor& g) -> Grads { return {softmax_backward(g, y, dim)}; });
}

Variable log_softmax(const Variable& a_in, int64_t dim) {
  const Variable a = autocast_args("log_softmax", a_in)[0];
  const Tensor y = log_softmax(a.data(), dim);
  return record("LogSoftmaxBackward", y, {a}, [y, dim](const Tensor& g) -> Grads {
    return {log_softmax_backward(g, y, dim)};
  });
}

Variable batch_norm(const Variable& input_in, const Variable& weight_in, const Variable& bias_in,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum, double eps) {
  const auto in = autocast_args("batch_norm", input_in, weight_in, bias_in);
  const Variable &input = in[0], &weight = in[1], &bias = in[2];
  BatchNormResult r = batch_norm(input.data(), weight.defined() ? weight.data() : Tensor(),
                                 bias.defined() ? bias.data() : Tensor(), running_mean,
                                 running_var, training, momentum, eps);
  const bool need_x = input.requires_grad();
  const bool need_affine = weight.defined() && (weight.requires_grad() ||
                                                (bias.defined() && bias.requires_grad()));
  const Tensor x = input.data();
  const Variable w = weight;
  return record("BatchNormBackward", r.output, {input, weight, bias},
                [=, mean = r.mean, invstd = r.invstd](const Tensor& g) -> Grads {
                  BatchNormGrads grads =
                      batch_norm_backward(g, x, w.defined() ? w.data() : Tensor(), mean, invstd,
                                          training, need_x, need_affine);
                  return {grads.input, grads.weight, grads.bias};
                });
}

Variable batch_norm_relu(const Variable& input_in, const Variable& weight_in,
                         const Variable& bias_in, const Variable& residual,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         double momentum, double eps) {
  const auto in = autocast_args("batch_norm_relu", input_in, weight_in, bias_in);
  const Variable &input = in[0], &weight = in[1], &bias = in[2];
  if (residual.defined() && residual.dtype() != input.dtype()) {
    // The sum would promote (f16 + f32 is f32): the unfused ops say how, autocast included.
    return relu(add(batch_norm(input, weight, bias, running_mean, running_var, training,
                               momentum, eps),
                    residual));
  }
  BatchNormResult r = batch_norm_relu(
      input.data(), weight.defined() ? weight.data() : Tensor(),
      bias.defined() ? bias.data() : Tensor(), residual.defined() ? residual.data() : Tensor(),
      running_mean, running_var, training, momentum, eps);
  const bool need_x = input.requires_grad();
  const bool need_affine = weight.defined() && (weight.requires_grad() ||
                                                (bias.defined() && bias.requires_grad()));
  const bool need_residual = residual.defined() && residual.requires_grad();
  const Tensor x = input.data();
  const Variable w = weight;
  // The output is saved as the ReLU's mask (y > 0), as relu's backward does.
  return record("BatchNormReluBackward", r.output, {input, weight, bias, residual},
                [=, y = r.output, mean = r.mean, invstd = r.invstd](const Tensor& g) -> Grads {
                  BatchNormReluGrads grads = batch_norm_relu_backward(
                      g, y, x, w.defined() ? w.data() : Tensor(), mean, invstd, training, need_x,
                      need_affine, need_residual);
                  return {grads.input, grads.weight, grads.bias, grads.residual};
                });
}

Variable dropout(const Variable& a, double p, bool training, Generator* gen) {
  TS_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0) return a;
  if (p == 1) return mul(a, 0.0);
  // The mask holds 0 or 1/(1-p), so the expected value of every element is unchanged.
  const Tensor mask = mul(bernoulli(a.shape(), 1 - p, a.data().options(), gen), 1.0 / (1 - p));
  return record("DropoutBackward", mul(a.data(), mask), {a},
                [mask](const Tensor& g) -> Grads { return {mul(g, mask)}; });
}

}  // namespace tessera
