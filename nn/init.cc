#include "nn/init.h"

#include <cmath>

#include "tensor/ops.h"

namespace tessera {
namespace nn {
namespace init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  TS_CHECK(t.dim() >= 2, "init: fan in and fan out need at least 2 dims, got shape ", t.shape());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::kLinear:
    case Nonlinearity::kSigmoid: return 1.0;
    case Nonlinearity::kReLU: return std::sqrt(2.0);
    case Nonlinearity::kTanh: return 5.0 / 3.0;
    case Nonlinearity::kLeakyReLU: return std::sqrt(2.0 / (1 + param * param));
  }
  return 1.0;
}

void uniform_(Tensor t, double low, double high, Generator* gen) { tessera::uniform_(t, low, high, gen); }
void normal_(Tensor t, double mean, double std, Generator* gen) { tessera::normal_(t, mean, std, gen); }
void constant_(Tensor t, double value) { t.fill_(value); }
void zeros_(Tensor t) { t.fill_(0); }
void ones_(Tensor t) { t.fill_(1); }

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::kFanIn ? fan_in : fan_out;
  TS_CHECK(fan > 0, "kaiming init: fan is 0 for shape ", t.shape());
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

void kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  tessera::uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  tessera::normal_(t, 0, kaiming_std(t, a, mode, nonlinearity), gen);
}

void xavier_uniform_(Tensor t, double gain, Generator* gen) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  tessera::uniform_(t, -bound, bound, gen);
}

void xavier_normal_(Tensor t, double gain, Generator* gen) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  tessera::normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

}  // namespace init
}  // namespace nn
}  // namespace tessera
