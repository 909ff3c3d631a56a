// CPU random fills from Philox counters: element i of a tensor depends only on (seed, offset, i).
//   f32 uniform: counter offset + i/4, word i%4
//   f64 uniform: counter offset + i/2, words (2(i%2), 2(i%2)+1)
//   normal (Box-Muller): the pair (2j, 2j+1) comes from counter offset + j.
#include <cmath>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"
#include "tensor/random.h"

namespace tessera {
namespace cpu {

namespace {
constexpr double kTwoPi = 6.283185307179586476925286766559;

// Two independent uniforms in (0, 1] and [0, 1) from one counter.
template <typename C>
std::pair<C, C> uniform_pair(uint64_t seed, uint64_t counter) {
  const std::array<uint32_t, 4> r = philox4x32(seed, counter);
  if constexpr (std::is_same_v<C, double>) {
    return {1.0 - uniform_double_from_bits(r[0], r[1]), uniform_double_from_bits(r[2], r[3])};
  } else {
    return {1.0f - uniform_from_bits(r[0]), uniform_from_bits(r[1])};
  }
}
}  // namespace

void CpuBackend::uniform(const Tensor& out, double low, double high, uint64_t seed,
                         uint64_t offset) {
  TS_DISPATCH_FLOATING(out.dtype(), "uniform", [&] {
    scalar_t* y = static_cast<scalar_t*>(out.raw_data());
    const int64_t n = out.numel();
    constexpr bool wide = std::is_same_v<scalar_t, double>;
    const int64_t per = wide ? 2 : 4;
    parallel_for((n + per - 1) / per, 1024, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const std::array<uint32_t, 4> r = philox4x32(seed, offset + b);
        for (int64_t k = 0; k < per && b * per + k < n; ++k) {
          const double u = wide ? uniform_double_from_bits(r[2 * k], r[2 * k + 1])
                                : double(uniform_from_bits(r[k]));
          y[b * per + k] = scalar_t(static_cast<compute_t<scalar_t>>(low + (high - low) * u));
        }
      }
    });
  });
}

void CpuBackend::normal(const Tensor& out, double mean, double std, uint64_t seed,
                        uint64_t offset) {
  TS_DISPATCH_FLOATING(out.dtype(), "normal", [&] {
    using C = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    scalar_t* y = static_cast<scalar_t*>(out.raw_data());
    const int64_t n = out.numel();
    parallel_for((n + 1) / 2, 1024, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const auto [u1, u2] = uniform_pair<C>(seed, offset + j);
        const C radius = std::sqrt(C(-2) * std::log(u1));
        const C angle = C(kTwoPi) * u2;
        y[2 * j] = scalar_t(C(mean + std * radius * std::cos(angle)));
        if (2 * j + 1 < n) y[2 * j + 1] = scalar_t(C(mean + std * radius * std::sin(angle)));
      }
    });
  });
}

}  // namespace cpu
}  // namespace tessera
