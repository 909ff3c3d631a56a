#include "tools/train/autocast_forward.h"

#include <optional>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"

namespace tessera {
namespace train {

Variable autocast_loss(const MixedPrecision& precision, const Forward& forward,
                       const Criterion& criterion, const Tensor& inputs, const Tensor& targets) {
  std::optional<AutocastGuard> autocast;
  precision.autocast(autocast);
  return criterion(forward(Variable(inputs)), targets);
}

Tensor autocast_predict(const MixedPrecision& precision, const Forward& forward,
                        const Tensor& inputs) {
  NoGradGuard no_grad;
  std::optional<AutocastGuard> autocast;
  precision.autocast(autocast);
  return forward(Variable(inputs)).data();
}

}  // namespace train
}  // namespace tessera
