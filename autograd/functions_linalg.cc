// Differentiable matmul and linear.
//   C = A B:  dA = dC B^T,  dB = A^T dC   (summed over broadcast batch dims)
//   y = x W^T + b:  dx = dy W,  dW = dy^T x,  db = sum of dy over all but the last dim
#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"
#include "autograd/weight_grad.h"

namespace tessera {

Variable matmul(const Variable& a_in, const Variable& b_in) {
  const auto in = autocast_args("matmul", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  if (a.dim() == 1 && b.dim() == 1) {
    return reshape(matmul(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  }
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
  const detail::InputMeta ma = detail::meta(a), mb = detail::meta(b);
  const Tensor x = mb.needs_grad ? a.data() : Tensor();  // A, kept only if dB is needed
  const Tensor y = ma.needs_grad ? b.data() : Tensor();  // B, kept only if dA is needed
  return record("MatmulBackward", matmul(a.data(), b.data()), {a, b},
                [ma, mb, x, y](const Tensor& g) -> Grads {
                  Tensor ga, gb;
                  if (ma.needs_grad) ga = detail::reduce_to(matmul(g, y.transpose(-1, -2)), ma);
                  if (mb.needs_grad) {
                    if (mb.shape.size() == 2 && x.dim() > 2) {
                      // B shared by every batch entry: one GEMM over the folded batch.
                      const int64_t k = x.size(-1), n = g.size(-1);
                      gb = matmul(x.reshape({-1, k}).t(), g.reshape({-1, n})).to(mb.dtype);
                    } else {
                      gb = detail::reduce_to(matmul(x.transpose(-1, -2), g), mb);
                    }
                  }
                  return {ga, gb};
                });
}

Variable linear(const Variable& x_in, const Variable& weight_in, const Variable& bias_in) {
  const auto in = autocast_args("linear", x_in, weight_in, bias_in);
  const Variable &x = in[0], &weight = in[1], &bias = in[2];
  TS_CHECK(x.dim() >= 1 && weight.dim() == 2, "linear: expected input [..., in] and weight "
           "[out, in], got ", x.shape(), " and ", weight.shape());
  TS_CHECK(x.size(-1) == weight.size(1), "linear: input features ", x.size(-1),
           " differ from weight ", weight.shape(), " (in = ", weight.size(1), ")");
  Tensor out = matmul(x.data(), weight.data().t());
  if (bias.defined()) {
    TS_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias shape ",
             bias.shape(), " does not match ", weight.size(0), " outputs");
    add_(out, bias.data());
  }
  const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Tensor input = need_w ? x.data() : Tensor();
  // The weight is saved as a Variable: backward reads whatever data it holds then.
  const Variable w = need_x ? weight : Variable();
  // B: the input's gradient; W (deferred under a WeightGradStore): the weight's and bias's.
  return record_split(
      "LinearBackward", out, {x, weight, bias},
      [need_x, w](const Tensor& g) -> Grads {
        return {need_x ? matmul(g, w.data()) : Tensor(), Tensor(), Tensor()};
      },
      [need_w, need_b, input](const Tensor& g) -> Grads {
        Tensor gw, gb;
        const int64_t out_features = g.size(-1);
        if (need_w) {
          const Tensor g2 = g.reshape({-1, out_features});
          gw = matmul(g2.t(), input.reshape({-1, input.size(-1)}));
        }
        if (need_b) gb = sum(g.reshape({-1, out_features}), {0});
        return {Tensor(), gw, gb};
      },
      input.defined() ? static_cast<int64_t>(input.nbytes()) : 0);
}

}  // namespace tessera
