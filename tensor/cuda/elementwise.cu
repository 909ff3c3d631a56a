// Elementwise CUDA kernels: copy (any dtype to any dtype, strided on both sides), fill, unary,
// binary and where. One thread per output element in a grid-stride loop; an operand that is
// contiguous is addressed at the linear index directly, a strided or broadcast one (stride 0)
// through offset_of() (outputs too: in-place ops may write through a view). Arithmetic runs in the compute type (f32 for f16/bf16), as on the CPU.
#include <cmath>

#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"

namespace tessera {
namespace cuda {

namespace {

// Math on integers goes through double, as std::exp(int) does on the CPU.
template <typename C>
using math_t = std::conditional_t<std::is_floating_point_v<C>, C, double>;

template <typename Out, typename In>
__global__ void copy_kernel(TensorArg src, TensorArg dst, int64_t n) {
  const In* s = static_cast<const In*>(src.data);
  Out* d = static_cast<Out*>(dst.data);
  TS_GRID_STRIDE(i, n) { d[offset_of(i, dst)] = store<Out>(load(s[offset_of(i, src)])); }
}

template <typename T>
__global__ void fill_kernel(TensorArg dst, T value, int64_t n) {
  T* d = static_cast<T*>(dst.data);
  TS_GRID_STRIDE(i, n) { d[offset_of(i, dst)] = value; }
}

template <typename C>
__device__ __forceinline__ C unary_value(UnaryOp op, C x, double alpha, double beta) {
  using M = math_t<C>;
  switch (op) {
    case UnaryOp::kNeg: return C(-x);
    case UnaryOp::kAbs: return x < C(0) ? C(-x) : x;
    case UnaryOp::kExp: return C(exp(M(x)));
    case UnaryOp::kLog: return C(log(M(x)));
    case UnaryOp::kSqrt: return C(sqrt(M(x)));
    case UnaryOp::kRsqrt: return C(M(1) / sqrt(M(x)));
    case UnaryOp::kTanh: return C(tanh(M(x)));
    case UnaryOp::kSigmoid: return C(M(1) / (M(1) + exp(-M(x))));
    case UnaryOp::kRelu: return x > C(0) ? x : C(0);
    case UnaryOp::kSign: return C((x > C(0)) - (x < C(0)));
    case UnaryOp::kSquare: return C(x * x);
    case UnaryOp::kReciprocal: return C(M(1) / M(x));
    case UnaryOp::kClamp:
      if (x < alpha) return C(alpha);
      if (x > beta) return C(beta);
      return x;
  }
  return x;
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, TensorArg in, TensorArg out, double alpha, double beta,
                             int64_t n) {
  const T* x = static_cast<const T*>(in.data);
  T* y = static_cast<T*>(out.data);
  TS_GRID_STRIDE(i, n) {
    y[offset_of(i, out)] = store<T>(unary_value(op, load(x[offset_of(i, in)]), alpha, beta));
  }
}

__host__ __device__ constexpr bool is_comparison(BinaryOp op) {
  return op >= BinaryOp::kEq && op <= BinaryOp::kGe;
}

template <typename C>
__device__ __forceinline__ C binary_value(BinaryOp op, C x, C y) {
  using M = math_t<C>;
  switch (op) {
    case BinaryOp::kAdd: return C(x + y);
    case BinaryOp::kSub: return C(x - y);
    case BinaryOp::kMul: return C(x * y);
    case BinaryOp::kDiv: return C(x / y);
    case BinaryOp::kMaximum: return (x != x || x > y) ? x : y;
    case BinaryOp::kMinimum: return (x != x || x < y) ? x : y;
    case BinaryOp::kPow: return y == C(2) ? C(x * x) : C(pow(M(x), M(y)));
    case BinaryOp::kEq: return C(x == y);
    case BinaryOp::kNe: return C(x != y);
    case BinaryOp::kLt: return C(x < y);
    case BinaryOp::kLe: return C(x <= y);
    case BinaryOp::kGt: return C(x > y);
    case BinaryOp::kGe: return C(x >= y);
    case BinaryOp::kReluBackward: return y > C(0) ? x : C(0);
    case BinaryOp::kSigmoidBackward: return C(x * y * (C(1) - y));
    case BinaryOp::kTanhBackward: return C(x * (C(1) - y * y));
  }
  return x;
}

// Bool operands compute as 0/1 integers, like the CPU's bytes.
template <typename T>
using binary_compute_t = std::conditional_t<std::is_same_v<T, bool>, int, acc_t<T>>;

template <typename T, typename Out>
__global__ void binary_kernel(BinaryOp op, TensorArg a, TensorArg b, TensorArg out, int64_t n) {
  using C = binary_compute_t<T>;
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  Out* z = static_cast<Out*>(out.data);
  TS_GRID_STRIDE(i, n) {
    const C u = C(load(x[offset_of(i, a)]));
    const C v = C(load(y[offset_of(i, b)]));
    z[offset_of(i, out)] = store<Out>(binary_value<C>(op, u, v));
  }
}

template <typename T>
__global__ void where_kernel(TensorArg cond, TensorArg a, TensorArg b, TensorArg out,
                             int64_t n) {
  const bool* c = static_cast<const bool*>(cond.data);
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  T* z = static_cast<T*>(out.data);
  TS_GRID_STRIDE(i, n) {
    z[offset_of(i, out)] = c[offset_of(i, cond)] ? x[offset_of(i, a)] : y[offset_of(i, b)];
  }
}

}  // namespace

void launch_copy(const TensorArg& src, const TensorArg& dst, int64_t numel, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_ALL(dst.dtype, "copy", [&] {
    using Out = scalar_t;
    TS_CUDA_DISPATCH_ALL(src.dtype, "copy", [&] {
      copy_kernel<Out, scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(src, dst, numel);
    });
  });
  check_launch("copy");
}

void launch_fill(const TensorArg& dst, double value, int64_t numel, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_ALL(dst.dtype, "fill", [&] {
    const scalar_t v = store<scalar_t>(value);
    fill_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(dst, v, numel);
  });
  check_launch("fill");
}

void launch_unary(UnaryOp op, const TensorArg& in, const TensorArg& out, double alpha,
                  double beta, int64_t numel, cudaStream_t s) {
  if (numel == 0) return;
  if (in.dtype == DType::kBool) fail_dtype("unary", in.dtype);
  TS_CUDA_DISPATCH_ALL(in.dtype, "unary", [&] {
    unary_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(op, in, out, alpha, beta,
                                                                  numel);
  });
  check_launch("unary");
}

void launch_binary(BinaryOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out,
                   int64_t numel, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_ALL(a.dtype, "binary", [&] {
    if (is_comparison(op)) {
      binary_kernel<scalar_t, bool><<<blocks_for(numel), kThreads, 0, s>>>(op, a, b, out, numel);
    } else {
      binary_kernel<scalar_t, scalar_t>
          <<<blocks_for(numel), kThreads, 0, s>>>(op, a, b, out, numel);
    }
  });
  check_launch("binary");
}

void launch_where(const TensorArg& cond, const TensorArg& a, const TensorArg& b,
                  const TensorArg& out, int64_t numel, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_ALL(a.dtype, "where", [&] {
    where_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(cond, a, b, out, numel);
  });
  check_launch("where");
}

}  // namespace cuda
}  // namespace tessera
