// CPU elementwise kernels: copy (with dtype conversion), fill, unary, binary, where.
// Arithmetic happens in compute_t<T> (f32 for f16/bf16), one rounding on the way out.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/loops.h"
#include "tensor/cpu/transpose16.h"

namespace tessera {
namespace cpu {

namespace {

template <typename To, typename From>
inline To convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(x) != 0.0f;
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

template <typename Out, typename In>
void copy_kernel(const Tensor& src, const Tensor& dst) {
  const In* s = static_cast<const In*>(src.raw_data());
  Out* d = static_cast<Out*>(dst.raw_data());
  for_each_run<2>(dst.shape(), {dst.strides(), src.strides()},
                  [&](const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                      int64_t n) {
                    Out* o = d + off[0];
                    const In* i = s + off[1];
                    if constexpr (std::is_same_v<Out, float> && kBlockWidened<In>) {
                      if (st[0] == 1 && st[1] == 1) return widen(i, o, n);
                    }
                    if constexpr (kBlockWidened<Out> && std::is_same_v<In, float>) {
                      if (st[0] == 1 && st[1] == 1) return narrow(i, o, n);
                    }
                    if (st[0] == 1 && st[1] == 1) {
                      for (int64_t j = 0; j < n; ++j) o[j] = convert<Out>(i[j]);
                    } else {
                      for (int64_t j = 0; j < n; ++j) o[j * st[0]] = convert<Out>(i[j * st[1]]);
                    }
                  });
}

template <typename T, typename F>
void unary_kernel(const Tensor& in, const Tensor& out, F f) {
  const T* x = static_cast<const T*>(in.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  using C = compute_t<T>;
  for_each_run<2>(out.shape(), {out.strides(), in.strides()},
                  [&](const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                      int64_t n) {
                    T* o = y + off[0];
                    const T* i = x + off[1];
                    if constexpr (kBlockWidened<T>) {
                      if (st[0] == 1 && st[1] == 1) {
                        float buf[kBf16Block];
                        for (int64_t j0 = 0; j0 < n; j0 += kBf16Block) {
                          const int64_t m = std::min(kBf16Block, n - j0);
                          widen(i + j0, buf, m);
                          for (int64_t j = 0; j < m; ++j) buf[j] = f(buf[j]);
                          narrow(buf, o + j0, m);
                        }
                        return;
                      }
                    }
                    if (st[1] == 1) {
                      for (int64_t j = 0; j < n; ++j) o[j] = T(f(C(i[j])));
                    } else {
                      for (int64_t j = 0; j < n; ++j) o[j] = T(f(C(i[j * st[1]])));
                    }
                  });
}

template <typename T, typename Out, typename F>
void binary_kernel(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const T* x = static_cast<const T*>(a.raw_data());
  const T* y = static_cast<const T*>(b.raw_data());
  Out* z = static_cast<Out*>(out.raw_data());
  using C = compute_t<T>;
  for_each_run<3>(out.shape(), {out.strides(), a.strides(), b.strides()},
                  [&](const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st,
                      int64_t n) {
                    Out* o = z + off[0];
                    const T* p = x + off[1];
                    const T* q = y + off[2];
                    if constexpr (kBlockWidened<T> && std::is_same_v<Out, T>) {
                      if (st[0] == 1 && st[1] == 1 && (st[2] == 1 || st[2] == 0)) {
                        float a_buf[kBf16Block], b_buf[kBf16Block];
                        const float scalar = float(q[0]);
                        for (int64_t j0 = 0; j0 < n; j0 += kBf16Block) {
                          const int64_t m = std::min(kBf16Block, n - j0);
                          widen(p + j0, a_buf, m);
                          if (st[2] == 1) {
                            widen(q + j0, b_buf, m);
                            for (int64_t j = 0; j < m; ++j) a_buf[j] = f(a_buf[j], b_buf[j]);
                          } else {
                            for (int64_t j = 0; j < m; ++j) a_buf[j] = f(a_buf[j], scalar);
                          }
                          narrow(a_buf, o + j0, m);
                        }
                        return;
                      }
                    }
                    if (st[1] == 1 && st[2] == 1) {
                      for (int64_t j = 0; j < n; ++j) o[j] = Out(f(C(p[j]), C(q[j])));
                    } else if (st[1] == 1 && st[2] == 0) {
                      const C s = C(q[0]);
                      for (int64_t j = 0; j < n; ++j) o[j] = Out(f(C(p[j]), s));
                    } else {
                      for (int64_t j = 0; j < n; ++j) {
                        o[j] = Out(f(C(p[j * st[1]]), C(q[j * st[2]])));
                      }
                    }
                  });
}

template <typename C>
C sigmoid_of(C x) {
  return C(1) / (C(1) + std::exp(-x));
}

}  // namespace

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  TS_CHECK(src.device().is_cpu() && dst.device().is_cpu(), "copy: the CPU backend cannot copy ",
           src.device(), " -> ", dst.device());
  TS_INTERNAL_ASSERT(src.shape() == dst.shape());
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    if (src.raw_data() != dst.raw_data() && src.numel() > 0) {
      std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
    }
    return;
  }
  // 16-bit activations between NCHW and channels-last (a convolution's operands brought to the
  // layout it runs in, and back): tiles transposed in registers, not the strided loop.
  if (src.dtype() == dst.dtype() && src.element_size() == 2 && src.dim() == 4) {
    const auto bits = [](const Tensor& t) { return static_cast<uint16_t*>(t.raw_data()); };
    const int64_t n = src.size(0), c = src.size(1), s = src.size(2) * src.size(3);
    if (src.is_contiguous() && dst.is_channels_last()) {
      return nchw_to_nhwc_16bit(bits(src), bits(dst), n, c, s);
    }
    if (src.is_channels_last() && dst.is_contiguous()) {
      return nhwc_to_nchw_16bit(bits(src), bits(dst), n, c, s);
    }
  }
  TS_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using Out = scalar_t;
    TS_DISPATCH_ALL(src.dtype(), "copy", [&] { copy_kernel<Out, scalar_t>(src, dst); });
  });
}

void CpuBackend::fill(const Tensor& dst, double value) {
  TS_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    const scalar_t v = convert<scalar_t>(value);
    scalar_t* d = static_cast<scalar_t*>(dst.raw_data());
    for_each_run<1>(dst.shape(), {dst.strides()},
                    [&](const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& st,
                        int64_t n) {
                      for (int64_t j = 0; j < n; ++j) d[off[0] + j * st[0]] = v;
                    });
  });
}

namespace {
template <typename scalar_t>
void unary_typed(UnaryOp op, const Tensor& in, const Tensor& out, double alpha, double beta) {
  using C = compute_t<scalar_t>;
    switch (op) {
      case UnaryOp::kNeg: unary_kernel<scalar_t>(in, out, [](C x) { return -x; }); break;
      case UnaryOp::kAbs:
        unary_kernel<scalar_t>(in, out, [](C x) { return x < C(0) ? -x : x; });
        break;
      case UnaryOp::kExp: unary_kernel<scalar_t>(in, out, [](C x) { return std::exp(x); }); break;
      case UnaryOp::kLog: unary_kernel<scalar_t>(in, out, [](C x) { return std::log(x); }); break;
      case UnaryOp::kSqrt:
        unary_kernel<scalar_t>(in, out, [](C x) { return std::sqrt(x); });
        break;
      case UnaryOp::kRsqrt:
        unary_kernel<scalar_t>(in, out, [](C x) { return C(1) / std::sqrt(x); });
        break;
      case UnaryOp::kTanh:
        unary_kernel<scalar_t>(in, out, [](C x) { return std::tanh(x); });
        break;
      case UnaryOp::kSigmoid: unary_kernel<scalar_t>(in, out, sigmoid_of<C>); break;
      case UnaryOp::kRelu:
        unary_kernel<scalar_t>(in, out, [](C x) { return x > C(0) ? x : C(0); });
        break;
      case UnaryOp::kSign:
        unary_kernel<scalar_t>(in, out, [](C x) { return C((x > C(0)) - (x < C(0))); });
        break;
      case UnaryOp::kSquare: unary_kernel<scalar_t>(in, out, [](C x) { return x * x; }); break;
      case UnaryOp::kReciprocal:
        unary_kernel<scalar_t>(in, out, [](C x) { return C(1) / x; });
        break;
      case UnaryOp::kClamp: {
        const double lo = alpha, hi = beta;
        unary_kernel<scalar_t>(in, out, [lo, hi](C x) {
          if (x < lo) return C(lo);
          if (x > hi) return C(hi);
          return x;
        });
        break;
      }
    }
}
}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, double alpha,
                       double beta) {
  TS_CHECK(in.dtype() != kBool, "unary ops are not defined on bool tensors");
  switch (in.dtype()) {
    case kF32: return unary_typed<float>(op, in, out, alpha, beta);
    case kF64: return unary_typed<double>(op, in, out, alpha, beta);
    case kF16: return unary_typed<Half>(op, in, out, alpha, beta);
    case kBF16: return unary_typed<BFloat16>(op, in, out, alpha, beta);
    case kI64: return unary_typed<int64_t>(op, in, out, alpha, beta);
    case kI32: return unary_typed<int32_t>(op, in, out, alpha, beta);
    case kU8: return unary_typed<uint8_t>(op, in, out, alpha, beta);
    default: TS_FAIL("unary: unsupported dtype ", in.dtype());
  }
}

namespace {
template <typename T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::kAdd: binary_kernel<T, T>(a, b, out, [](C x, C y) { return x + y; }); break;
    case BinaryOp::kSub: binary_kernel<T, T>(a, b, out, [](C x, C y) { return x - y; }); break;
    case BinaryOp::kMul: binary_kernel<T, T>(a, b, out, [](C x, C y) { return x * y; }); break;
    case BinaryOp::kDiv: binary_kernel<T, T>(a, b, out, [](C x, C y) { return x / y; }); break;
    case BinaryOp::kMaximum:
      binary_kernel<T, T>(a, b, out, [](C x, C y) { return (x != x || x > y) ? x : y; });
      break;
    case BinaryOp::kMinimum:
      binary_kernel<T, T>(a, b, out, [](C x, C y) { return (x != x || x < y) ? x : y; });
      break;
    case BinaryOp::kPow:
      binary_kernel<T, T>(a, b, out, [](C x, C y) {
        if (y == C(2)) return C(x * x);
        return C(std::pow(x, y));
      });
      break;
    case BinaryOp::kEq: binary_kernel<T, bool>(a, b, out, [](C x, C y) { return x == y; }); break;
    case BinaryOp::kNe: binary_kernel<T, bool>(a, b, out, [](C x, C y) { return x != y; }); break;
    case BinaryOp::kLt: binary_kernel<T, bool>(a, b, out, [](C x, C y) { return x < y; }); break;
    case BinaryOp::kLe: binary_kernel<T, bool>(a, b, out, [](C x, C y) { return x <= y; }); break;
    case BinaryOp::kGt: binary_kernel<T, bool>(a, b, out, [](C x, C y) { return x > y; }); break;
    case BinaryOp::kGe: binary_kernel<T, bool>(a, b, out, [](C x, C y) { return x >= y; }); break;
    case BinaryOp::kReluBackward:
      binary_kernel<T, T>(a, b, out, [](C g, C x) { return x > C(0) ? g : C(0); });
      break;
    case BinaryOp::kSigmoidBackward:
      binary_kernel<T, T>(a, b, out, [](C g, C y) { return g * y * (C(1) - y); });
      break;
    case BinaryOp::kTanhBackward:
      binary_kernel<T, T>(a, b, out, [](C g, C y) { return g * (C(1) - y * y); });
      break;
  }
}
}  // namespace

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (a.dtype()) {
    case kF32: return binary_typed<float>(op, a, b, out);
    case kF64: return binary_typed<double>(op, a, b, out);
    case kF16: return binary_typed<Half>(op, a, b, out);
    case kBF16: return binary_typed<BFloat16>(op, a, b, out);
    case kI64: return binary_typed<int64_t>(op, a, b, out);
    case kI32: return binary_typed<int32_t>(op, a, b, out);
    case kU8: return binary_typed<uint8_t>(op, a, b, out);
    case kBool: {
      // Bools compute as bytes 0/1; a non-comparison result is converted back (non-zero: true).
      const Tensor a8 = a.to(kU8), b8 = b.to(kU8);
      if (out.dtype() == kBool && op >= BinaryOp::kEq && op <= BinaryOp::kGe) {
        return binary_typed<uint8_t>(op, a8, b8, out);
      }
      Tensor tmp = empty(out.shape(), kU8);
      binary_typed<uint8_t>(op, a8, b8, tmp);
      return copy(tmp, out);
    }
  }
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const bool* c = static_cast<const bool*>(cond.raw_data());
  TS_DISPATCH_ALL(out.dtype(), "where", [&] {
    const scalar_t* x = static_cast<const scalar_t*>(a.raw_data());
    const scalar_t* y = static_cast<const scalar_t*>(b.raw_data());
    scalar_t* z = static_cast<scalar_t*>(out.raw_data());
    for_each_run<4>(out.shape(), {out.strides(), cond.strides(), a.strides(), b.strides()},
                    [&](const std::array<int64_t, 4>& off, const std::array<int64_t, 4>& st,
                        int64_t n) {
                      for (int64_t j = 0; j < n; ++j) {
                        z[off[0] + j * st[0]] = c[off[1] + j * st[1]] ? x[off[2] + j * st[2]]
                                                                      : y[off[3] + j * st[3]];
                      }
                    });
  });
}

}  // namespace cpu
}  // namespace tessera
