#include "nn/activation.h"

#include "autograd/functions.h"

namespace tessera {
namespace nn {

Variable ReLU::forward(const Variable& x) { return relu(x); }
Variable Sigmoid::forward(const Variable& x) { return sigmoid(x); }
Variable Tanh::forward(const Variable& x) { return tanh(x); }

}  // namespace nn
}  // namespace tessera
