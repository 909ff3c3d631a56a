#include "nn/pooling.h"

#include "autograd/functions.h"

namespace tessera {
namespace nn {

namespace {
std::string window(const Pool2dParams& p) {
  return detail::str("kernel_size=", std::vector<int64_t>{p.kernel[0], p.kernel[1]}, ", stride=",
                     std::vector<int64_t>{p.stride[0], p.stride[1]}, ", padding=",
                     std::vector<int64_t>{p.padding[0], p.padding[1]});
}
}  // namespace

std::string MaxPool2d::extra_repr() const { return window(options_.params()); }
Variable MaxPool2d::forward(const Variable& x) { return max_pool2d(x, options_.params()); }

std::string AvgPool2d::extra_repr() const { return window(options_.params()); }
Variable AvgPool2d::forward(const Variable& x) { return avg_pool2d(x, options_.params()); }

std::string AdaptiveAvgPool2d::extra_repr() const {
  return detail::str("output_size=", std::vector<int64_t>{output_size_[0], output_size_[1]});
}
Variable AdaptiveAvgPool2d::forward(const Variable& x) {
  return adaptive_avg_pool2d(x, output_size_);
}

}  // namespace nn
}  // namespace tessera
