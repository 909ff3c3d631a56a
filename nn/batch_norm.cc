#include "nn/batch_norm.h"

#include <algorithm>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace nn {

BatchNorm2d::BatchNorm2d(const BatchNorm2dOptions& options) : options_(options) {
  const int64_t c = options.num_features();
  TS_CHECK(c > 0, "BatchNorm2d: num_features must be positive, got ", c);
  TS_CHECK(options.momentum() >= 0 && options.momentum() <= 1,
           "BatchNorm2d: momentum must be in [0, 1], got ", options.momentum());
  TS_CHECK(options.eps() > 0, "BatchNorm2d: eps must be positive, got ", options.eps());
  if (options.affine()) {
    weight_ = register_parameter("weight", ones({c}));
    bias_ = register_parameter("bias", zeros({c}));
  }
  if (options.track_running_stats()) {
    running_mean_ = register_buffer("running_mean", zeros({c}));
    running_var_ = register_buffer("running_var", ones({c}));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, kI64));
  }
}

std::string BatchNorm2d::extra_repr() const {
  return detail::str(options_.num_features(), ", eps=", options_.eps(), ", momentum=",
                     options_.momentum(), options_.affine() ? "" : ", affine=false");
}

Variable BatchNorm2d::forward(const Variable& x) { return normalize(x, false, Variable()); }

Variable BatchNorm2d::forward_relu(const Variable& x, const Variable& residual) {
  return call_with_hooks([&] { return normalize(x, true, residual); });
}

Variable BatchNorm2d::normalize(const Variable& x, bool relu, const Variable& residual) {
  TS_CHECK(x.dim() == 4 && x.size(1) == options_.num_features(), "BatchNorm2d: expected input [N, ",
           options_.num_features(), ", H, W], got ", x.shape());
  const auto op = [&](const Tensor& running_mean, const Tensor& running_var, bool training) {
    return relu ? batch_norm_relu(x, weight_, bias_, residual, running_mean, running_var,
                                  training, options_.momentum(), options_.eps())
                : batch_norm(x, weight_, bias_, running_mean, running_var, training,
                             options_.momentum(), options_.eps());
  };
  const bool track = options_.track_running_stats();
  if (is_training() && track && deferred_) {
    if (!in_backward()) {  // a recomputation inside a backward is not counted again
      NoGradGuard no_grad;
      const Tensor x64 = x.data().to(kF64);
      const Tensor s = sum(x64, {0, 2, 3}), ss = sum(mul(x64, x64), {0, 2, 3});
      sum_ = sum_.defined() ? add(sum_, s) : s;
      sum_of_squares_ = sum_of_squares_.defined() ? add(sum_of_squares_, ss) : ss;
      count_ += x.numel() / options_.num_features();
    }
    return op(Tensor(), Tensor(), true);
  }
  if (is_training() && track) {
    NoGradGuard no_grad;
    Tensor count = num_batches_tracked_.data();
    add_(count, ones({}, count.options()));
  }
  // Training normalizes with batch statistics and updates the running ones; eval uses the
  // running ones, or the batch's own when none are tracked (as PyTorch does).
  return op(track ? running_mean_.data() : Tensor(), track ? running_var_.data() : Tensor(),
            is_training() || !track);
}

void BatchNorm2d::defer_running_statistics(bool on) {
  TS_CHECK(on || count_ == 0, "BatchNorm2d::defer_running_statistics(false): ", count_,
           " accumulated values per channel were never committed");
  deferred_ = on;
}

void BatchNorm2d::commit_running_statistics() {
  if (count_ == 0 || !options_.track_running_stats()) return;
  NoGradGuard no_grad;
  const double n = static_cast<double>(count_), m = options_.momentum();
  const Tensor mean = div(sum_, n);
  // Unbiased, as the running variance of an ordinary forward (tensor/ops.h's batch_norm).
  const Tensor var = div(sub(sum_of_squares_, mul(mul(mean, mean), n)), std::max(n - 1, 1.0));
  Tensor rm = running_mean_.data(), rv = running_var_.data();
  rm.copy_(add(mul(rm.to(kF64), 1 - m), mul(mean, m)));
  rv.copy_(add(mul(rv.to(kF64), 1 - m), mul(var, m)));
  Tensor count = num_batches_tracked_.data();
  add_(count, ones({}, count.options()));
  sum_ = Tensor();
  sum_of_squares_ = Tensor();
  count_ = 0;
}

}  // namespace nn
}  // namespace tessera
