#include "nn/activation.h"

#include "autograd/functions.h"

namespace tessera {
namespace nn {

Variable ReLU::forward(const Variable& x) { return relu(x); }
Variable Sigmoid::forward(const Variable& x) { return sigmoid(x); }
Variable Tanh::forward(const Variable& x) { return tanh(x); }

Variable GELU::forward(const Variable& x) { return gelu(x, approximate_); }
std::string GELU::extra_repr() const {
  return approximate_ == GeluApproximate::kTanh ? "approximate='tanh'" : "";
}

}  // namespace nn
}  // namespace tessera
