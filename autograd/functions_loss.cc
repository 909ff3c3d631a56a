// Differentiable losses.
//
// cross_entropy fuses log-softmax with the negative log-likelihood (tensor/ops.h's
// cross_entropy_rows, one kernel pass per row): with p = softmax(x) and the target
// distribution q = (1 - eps) one_hot(y) + eps / C, the loss of a row is -sum_c q_c log p_c and
// its gradient with respect to the logits is simply p - q.
#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"
#include "autograd/loss_reduction.h"

namespace tessera {

namespace {

void check_classification(const Variable& scores, const Tensor& target, const char* op) {
  TS_CHECK(scores.dim() == 2, op, ": expected scores [N, C], got shape ", scores.shape());
  TS_CHECK(target.defined() && target.dim() == 1 && target.size(0) == scores.size(0), op,
           ": expected target [", scores.size(0), "] of class indices, got shape ",
           target.defined() ? target.shape() : Shape{});
  TS_CHECK(target.dtype() == kI64 || target.dtype() == kI32, op,
           ": target must hold class indices (i64 or i32), got ", target.dtype());
  if (target.numel() > 0) {
    const int64_t lo = static_cast<int64_t>(amin(target).item());
    const int64_t hi = static_cast<int64_t>(amax(target).item());
    TS_CHECK(lo >= 0 && hi < scores.size(1), op, ": target class out of range: values span [",
             lo, ", ", hi, "] but there are ", scores.size(1), " classes");
  }
}

}  // namespace

Variable cross_entropy(const Variable& logits_in, const Tensor& target, Reduction reduction,
                       double label_smoothing) {
  const Variable logits = autocast_args("cross_entropy", logits_in)[0];
  // The fused op checks shapes, dtypes, devices and the class range.
  const CrossEntropyRows r = cross_entropy_rows(logits.data(), target, label_smoothing);
  const int64_t n = logits.size(0);
  const Tensor log_probs = r.log_probs;
  return record("CrossEntropyBackward", reduce_rows(r.loss, reduction), {logits},
                [=](const Tensor& g) -> Grads {
                  return {cross_entropy_rows_backward(log_probs, target,
                                                      per_row_grad(g, n, reduction),
                                                      label_smoothing)};
                });
}

Variable nll_loss(const Variable& log_probs_in, const Tensor& target, Reduction reduction) {
  const Variable log_probs = autocast_args("nll_loss", log_probs_in)[0];
  check_classification(log_probs, target, "nll_loss");
  const int64_t n = log_probs.size(0), classes = log_probs.size(1);
  const Tensor idx = target.to(kI64).unsqueeze(1);
  const Tensor rows = neg(gather(log_probs.data(), 1, idx).squeeze(1));
  const DType dtype = log_probs.dtype();
  return record("NllLossBackward", reduce_rows(rows, reduction), {log_probs},
                [=](const Tensor& g) -> Grads {
                  return {mul(neg(one_hot(target, classes, dtype)), per_row_grad(g, n, reduction))};
                });
}

Variable mse_loss(const Variable& input_in, const Variable& target_in, Reduction reduction) {
  const auto in = autocast_args("mse_loss", input_in, target_in);
  const Variable &input = in[0], &target = in[1];
  TS_CHECK(input.shape() == target.shape(), "mse_loss: input shape ", input.shape(),
           " differs from target shape ", target.shape());
  const Variable sq = square(input - target);
  switch (reduction) {
    case Reduction::kMean: return mean(sq);
    case Reduction::kSum: return sum(sq);
    case Reduction::kNone: return sq;
  }
  return sq;
}

}  // namespace tessera
