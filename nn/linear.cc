#include "nn/linear.h"

#include <cmath>

#include "autograd/functions.h"
#include "nn/init.h"
#include "tensor/ops.h"

namespace tessera {
namespace nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features_(in_features), out_features_(out_features) {
  TS_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got in = ",
           in_features, ", out = ", out_features);
  weight_ = register_parameter("weight", empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight_.data(), std::sqrt(5.0));
  if (bias_.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
    init::uniform_(bias_.data(), -bound, bound);
  }
}

std::string Linear::extra_repr() const {
  return detail::str("in_features=", in_features_, ", out_features=", out_features_,
                     ", bias=", bias_.defined() ? "true" : "false");
}

Variable Linear::forward(const Variable& x) {
  return linear(x, weight_, bias_);
}

}  // namespace nn
}  // namespace tessera
