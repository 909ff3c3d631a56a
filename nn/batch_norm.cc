#include "nn/batch_norm.h"

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

Variable BatchNorm2d::forward(const Variable& x) {
  TS_CHECK(x.dim() == 4 && x.size(1) == options_.num_features(), "BatchNorm2d: expected input [N, ",
           options_.num_features(), ", H, W], got ", x.shape());
  const bool track = options_.track_running_stats();
  if (is_training() && track) {
    NoGradGuard no_grad;
    Tensor count = num_batches_tracked_.data();
    add_(count, ones({}, count.options()));
  }
  // Training normalizes with batch statistics and updates the running ones; eval uses the
  // running ones, or the batch's own when none are tracked (as PyTorch does).
  return batch_norm(x, weight_, bias_, track ? running_mean_.data() : Tensor(),
                    track ? running_var_.data() : Tensor(), is_training() || !track,
                    options_.momentum(), options_.eps());
}

}  // namespace nn
}  // namespace tessera
