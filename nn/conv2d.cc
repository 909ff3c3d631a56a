#include "nn/conv2d.h"

#include <cmath>

#include "autograd/functions.h"
#include "nn/init.h"
#include "tensor/ops.h"

namespace tessera {
namespace nn {

Conv2d::Conv2d(const Conv2dOptions& options) : options_(options) {
  const int64_t in = options.in_channels(), out = options.out_channels();
  const int64_t groups = options.params().groups;
  const auto k = options.kernel_size();
  TS_CHECK(in > 0 && out > 0 && k[0] > 0 && k[1] > 0, "Conv2d: channels and kernel must be "
           "positive, got in = ", in, ", out = ", out, ", kernel = [", k[0], ", ", k[1], "]");
  TS_CHECK(groups > 0 && in % groups == 0 && out % groups == 0, "Conv2d: ", in, " input and ",
           out, " output channels must be divisible by groups = ", groups);
  weight_ = register_parameter("weight", empty({out, in / groups, k[0], k[1]}));
  if (options.bias()) bias_ = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight_.data(), std::sqrt(5.0));
  if (bias_.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(
                                   init::fan_in_and_fan_out(weight_.data()).first));
    init::uniform_(bias_.data(), -bound, bound);
  }
}

std::string Conv2d::extra_repr() const {
  const Conv2dParams& p = options_.params();
  return detail::str(options_.in_channels(), ", ", options_.out_channels(), ", kernel_size=",
                     std::vector<int64_t>{options_.kernel_size()[0], options_.kernel_size()[1]},
                     ", stride=", std::vector<int64_t>{p.stride[0], p.stride[1]}, ", padding=",
                     std::vector<int64_t>{p.padding[0], p.padding[1]},
                     p.groups > 1 ? detail::str(", groups=", p.groups) : std::string(),
                     options_.bias() ? "" : ", bias=false");
}

Variable Conv2d::forward(const Variable& x) {
  return conv2d(x, weight_, bias_, options_.params());
}

}  // namespace nn
}  // namespace tessera
