// Random fills on CUDA with the CPU backend's exact Philox mapping (tensor/cpu/random.cc), so a
// seed gives the same tensor on either device:
//   f32 (and f16/bf16) uniform: counter offset + i/4, word i%4
//   f64 uniform: counter offset + i/2, words (2(i%2), 2(i%2)+1)
//   normal (Box-Muller): the pair (2j, 2j+1) comes from counter offset + j.
#include <cmath>

#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"
#include "tensor/philox.h"

namespace tessera {
namespace cuda {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

template <typename T>
__global__ void uniform_kernel(T* y, int64_t n, double low, double high, uint64_t seed,
                               uint64_t offset) {
  constexpr bool wide = std::is_same_v<T, double>;
  constexpr int64_t per = wide ? 2 : 4;
  TS_GRID_STRIDE(b, (n + per - 1) / per) {
    const PhiloxWords r = philox4x32_10(seed, offset + b);
    for (int64_t k = 0; k < per && b * per + k < n; ++k) {
      const double u = wide ? uniform_double_from_bits(r[2 * k], r[2 * k + 1])
                            : double(uniform_from_bits(r[k]));
      y[b * per + k] = store<T>(static_cast<acc_t<T>>(low + (high - low) * u));
    }
  }
}

template <typename T>
__global__ void normal_kernel(T* y, int64_t n, double mean, double std, uint64_t seed,
                              uint64_t offset) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  TS_GRID_STRIDE(j, (n + 1) / 2) {
    const PhiloxWords r = philox4x32_10(seed, offset + j);
    C u1, u2;
    if constexpr (std::is_same_v<C, double>) {
      u1 = 1.0 - uniform_double_from_bits(r[0], r[1]);
      u2 = uniform_double_from_bits(r[2], r[3]);
    } else {
      u1 = 1.0f - uniform_from_bits(r[0]);
      u2 = uniform_from_bits(r[1]);
    }
    const C radius = sqrt(C(-2) * log(u1));
    const C angle = C(kTwoPi) * u2;
    y[2 * j] = store<T>(C(mean + std * radius * cos(angle)));
    if (2 * j + 1 < n) y[2 * j + 1] = store<T>(C(mean + std * radius * sin(angle)));
  }
}

}  // namespace

void launch_uniform(void* out, DType dtype, int64_t numel, double low, double high,
                    uint64_t seed, uint64_t offset, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "uniform", [&] {
    uniform_kernel<scalar_t><<<blocks_for((numel + 3) / 4), kThreads, 0, s>>>(
        static_cast<scalar_t*>(out), numel, low, high, seed, offset);
  });
  check_launch("uniform");
}

void launch_normal(void* out, DType dtype, int64_t numel, double mean, double std,
                   uint64_t seed, uint64_t offset, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "normal", [&] {
    normal_kernel<scalar_t><<<blocks_for((numel + 1) / 2), kThreads, 0, s>>>(
        static_cast<scalar_t*>(out), numel, mean, std, seed, offset);
  });
  check_launch("normal");
}

}  // namespace cuda
}  // namespace tessera
