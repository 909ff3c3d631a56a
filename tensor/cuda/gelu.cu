// GELU on CUDA, elementwise, with the CPU kernel's formulas (tensor/cpu/gelu.cc has them and
// their derivatives): the exact form through erf, GPT-2's through tanh. Computed in f32 for
// f16/bf16 (f64 for f64), one rounding on the way out; the backward recomputes tanh from x.
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/transformer_kernels.h"

namespace tessera {
namespace cuda {

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kCubeCoeff = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;      // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;    // 1 / sqrt(2 pi)

template <typename T, bool kTanh>
__global__ void gelu_kernel(const T* in, T* out, int64_t numel) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(i, numel) {
    const C x = load(in[i]);
    C y;
    if constexpr (kTanh) {
      y = C(0.5) * x * (C(1) + tanh(C(kSqrt2OverPi) * (x + C(kCubeCoeff) * x * x * x)));
    } else {
      y = C(0.5) * x * (C(1) + erf(x * C(kInvSqrt2)));
    }
    out[i] = store<T>(y);
  }
}

template <typename T, bool kTanh>
__global__ void gelu_backward_kernel(const T* grad_out, const T* in, T* grad_in, int64_t numel) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(i, numel) {
    const C x = load(in[i]);
    C d;
    if constexpr (kTanh) {
      const C t = tanh(C(kSqrt2OverPi) * (x + C(kCubeCoeff) * x * x * x));
      d = C(0.5) * (C(1) + t) +
          C(0.5) * x * (C(1) - t * t) * C(kSqrt2OverPi) * (C(1) + C(3 * kCubeCoeff) * x * x);
    } else {
      d = C(0.5) * (C(1) + erf(x * C(kInvSqrt2))) + x * C(kInvSqrt2Pi) * exp(C(-0.5) * x * x);
    }
    grad_in[i] = store<T>(load(grad_out[i]) * d);
  }
}

}  // namespace

void launch_gelu(const void* in, void* out, GeluApproximate approximate, DType dtype,
                 int64_t numel, cudaStream_t stream) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "gelu", [&] {
    const auto* x = static_cast<const scalar_t*>(in);
    auto* y = static_cast<scalar_t*>(out);
    if (approximate == GeluApproximate::kTanh) {
      gelu_kernel<scalar_t, true><<<blocks_for(numel), kThreads, 0, stream>>>(x, y, numel);
    } else {
      gelu_kernel<scalar_t, false><<<blocks_for(numel), kThreads, 0, stream>>>(x, y, numel);
    }
  });
  check_launch("gelu");
}

void launch_gelu_backward(const void* grad_out, const void* in, void* grad_in,
                          GeluApproximate approximate, DType dtype, int64_t numel,
                          cudaStream_t stream) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "gelu_backward", [&] {
    const auto* g = static_cast<const scalar_t*>(grad_out);
    const auto* x = static_cast<const scalar_t*>(in);
    auto* dx = static_cast<scalar_t*>(grad_in);
    if (approximate == GeluApproximate::kTanh) {
      gelu_backward_kernel<scalar_t, true>
          <<<blocks_for(numel), kThreads, 0, stream>>>(g, x, dx, numel);
    } else {
      gelu_backward_kernel<scalar_t, false>
          <<<blocks_for(numel), kThreads, 0, stream>>>(g, x, dx, numel);
    }
  });
  check_launch("gelu_backward");
}

}  // namespace cuda
}  // namespace tessera
