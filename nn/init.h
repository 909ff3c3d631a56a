// Parameter initialization, in place, from a seeded generator (the default one unless given).
// The formulas are PyTorch's (torch.nn.init), so models start from the same distributions.
#pragma once

#include <utility>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace tessera {
namespace nn {
namespace init {

enum class FanMode { kFanIn, kFanOut };
enum class Nonlinearity { kLinear, kReLU, kLeakyReLU, kTanh, kSigmoid };

// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

void uniform_(Tensor t, double low, double high, Generator* gen = nullptr);
void normal_(Tensor t, double mean, double std, Generator* gen = nullptr);
void constant_(Tensor t, double value);
void zeros_(Tensor t);
void ones_(Tensor t);
// He et al.: bound = gain * sqrt(3 / fan); a is the leaky-ReLU slope.
void kaiming_uniform_(Tensor t, double a = 0, FanMode mode = FanMode::kFanIn,
                      Nonlinearity nonlinearity = Nonlinearity::kLeakyReLU,
                      Generator* gen = nullptr);
void kaiming_normal_(Tensor t, double a = 0, FanMode mode = FanMode::kFanIn,
                     Nonlinearity nonlinearity = Nonlinearity::kLeakyReLU,
                     Generator* gen = nullptr);
// Glorot and Bengio: bound = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(Tensor t, double gain = 1.0, Generator* gen = nullptr);
void xavier_normal_(Tensor t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace init
}  // namespace nn
}  // namespace tessera
