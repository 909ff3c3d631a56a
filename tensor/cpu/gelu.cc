// CPU GELU, forward and backward, in both of PyTorch's forms:
//   exact (kNone):  y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
//                   dy/dx = Phi(x) + x * phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh (kTanh):   y = 0.5 x (1 + t),  t = tanh(u),  u = sqrt(2 / pi) (x + 0.044715 x^3)
//                   dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2)
// GPT-2 uses the tanh form. The backward recomputes t from x rather than saving it: one more
// tanh per element costs less than a tensor of the MLP's widest activation kept per layer.
//
// The formulas are Eigen array expressions over blocks of kBf16Block values: Eigen evaluates
// tanh, erf and exp with its vectorized rational approximations (for f32, accurate to a few ulp),
// where std::tanh would be a scalar libm call per element. f16/bf16 blocks are widened to f32
// and rounded back once; f64 runs the same expressions in f64.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

template <typename C>
using Block = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
template <typename C>
using ConstBlock = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kCubeCoeff = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;      // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;    // 1 / sqrt(2 pi)

// y = gelu(x) on m values of C (y may alias x).
template <typename C>
void gelu_block(const C* xp, C* yp, int64_t m, GeluApproximate approximate) {
  const ConstBlock<C> x(xp, m);
  Block<C> y(yp, m);
  if (approximate == GeluApproximate::kTanh) {
    y = C(0.5) * x * (C(1) + (C(kSqrt2OverPi) * (x + C(kCubeCoeff) * x.cube())).tanh());
  } else {
    y = C(0.5) * x * (C(1) + (x * C(kInvSqrt2)).erf());
  }
}

// dx = g * gelu'(x) on m values of C (dx may alias g or x).
template <typename C>
void gelu_backward_block(const C* gp, const C* xp, C* dxp, int64_t m,
                         GeluApproximate approximate) {
  const ConstBlock<C> g(gp, m), x(xp, m);
  Block<C> dx(dxp, m);
  if (approximate == GeluApproximate::kTanh) {
    C t_values[kBf16Block];  // m <= kBf16Block: no heap temporary per block
    Block<C> t(t_values, m);
    t = (C(kSqrt2OverPi) * (x + C(kCubeCoeff) * x.cube())).tanh();
    dx = g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t.square()) * C(kSqrt2OverPi) *
                                        (C(1) + C(3 * kCubeCoeff) * x.square()));
  } else {
    dx = g * (C(0.5) * (C(1) + (x * C(kInvSqrt2)).erf()) +
              x * C(kInvSqrt2Pi) * (C(-0.5) * x.square()).exp());
  }
}

// The two above on m (<= kBf16Block) values of storage type T: in place when T is the compute
// type C, else widened to f32 and rounded back once.
template <typename C, typename T>
void gelu_stored(const T* x, T* y, int64_t m, GeluApproximate approximate) {
  if constexpr (std::is_same_v<T, C>) {
    gelu_block<C>(x, y, m, approximate);
  } else {
    float buf[kBf16Block];
    widen(x, buf, m);
    gelu_block<float>(buf, buf, m, approximate);
    narrow(buf, y, m);
  }
}

template <typename C, typename T>
void gelu_backward_stored(const T* g, const T* x, T* dx, int64_t m,
                          GeluApproximate approximate) {
  if constexpr (std::is_same_v<T, C>) {
    gelu_backward_block<C>(g, x, dx, m, approximate);
  } else {
    float gbuf[kBf16Block], xbuf[kBf16Block];
    widen(g, gbuf, m);
    widen(x, xbuf, m);
    gelu_backward_block<float>(gbuf, xbuf, gbuf, m, approximate);
    narrow(gbuf, dx, m);
  }
}

// Runs block(offset, m) over [0, numel) in pieces of at most kBf16Block, split among threads.
template <typename F>
void for_each_block(int64_t numel, F block) {
  parallel_for(numel, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t j0 = begin; j0 < end; j0 += kBf16Block) {
      block(j0, std::min(kBf16Block, end - j0));
    }
  });
}

}  // namespace

void CpuBackend::gelu(const Tensor& in, const Tensor& out, GeluApproximate approximate) {
  TS_DISPATCH_FLOATING(in.dtype(), "gelu", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* x = in.data<scalar_t>();
    scalar_t* y = out.data<scalar_t>();
    for_each_block(in.numel(), [&](int64_t j0, int64_t m) {
      gelu_stored<C>(x + j0, y + j0, m, approximate);
    });
  });
}

void CpuBackend::gelu_backward(const Tensor& grad_out, const Tensor& in, const Tensor& grad_in,
                               GeluApproximate approximate) {
  TS_DISPATCH_FLOATING(in.dtype(), "gelu_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* g = grad_out.data<scalar_t>();
    const scalar_t* x = in.data<scalar_t>();
    scalar_t* dx = grad_in.data<scalar_t>();
    for_each_block(in.numel(), [&](int64_t j0, int64_t m) {
      gelu_backward_stored<C>(g + j0, x + j0, dx + j0, m, approximate);
    });
  });
}

}  // namespace cpu
}  // namespace tessera
