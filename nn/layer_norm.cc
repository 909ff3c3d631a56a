#include "nn/layer_norm.h"

#include "autograd/functions.h"
#include "nn/init.h"

namespace tessera {
namespace nn {

LayerNorm::LayerNorm(const LayerNormOptions& options) : options_(options) {
  const int64_t n = options.normalized_size();
  TS_CHECK(n > 0, "LayerNorm: normalized_size must be positive, got ", n);
  TS_CHECK(options.eps() > 0, "LayerNorm: eps must be positive, got ", options.eps());
  if (options.elementwise_affine()) {
    weight_ = register_parameter("weight", empty({n}));
    if (options.bias()) bias_ = register_parameter("bias", empty({n}));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (weight_.defined()) init::ones_(weight_.data());
  if (bias_.defined()) init::zeros_(bias_.data());
}

std::string LayerNorm::extra_repr() const {
  return detail::str("(", options_.normalized_size(), "), eps=", options_.eps(),
                     options_.elementwise_affine() ? "" : ", elementwise_affine=false",
                     options_.elementwise_affine() && !options_.bias() ? ", bias=false" : "");
}

Variable LayerNorm::forward(const Variable& x) {
  const int64_t n = options_.normalized_size();
  TS_CHECK(x.dim() >= 1 && x.size(-1) == n, "LayerNorm(", n, "): expected input [..., ", n,
           "], got ", x.shape());
  return layer_norm(x, weight_, bias_, options_.eps());
}

}  // namespace nn
}  // namespace tessera
