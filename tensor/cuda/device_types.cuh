// Device-side helpers for the kernels: the CUDA type of each DType, the compute type (f32 for
// the 2-byte floats), conversions, a grid-stride loop and type dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tensor/cuda/kernel_args.h"

namespace tessera {
namespace cuda {

using half_t = __half;
using bf16_t = __nv_bfloat16;

// Compute type: f32 for the 2-byte floats, the type itself otherwise.
template <typename T> struct Acc { using type = T; };
template <> struct Acc<half_t> { using type = float; };
template <> struct Acc<bf16_t> { using type = float; };
template <typename T>
using acc_t = typename Acc<T>::type;

template <typename T>
__host__ __device__ __forceinline__ acc_t<T> load(const T& x) {
  if constexpr (std::is_same_v<T, half_t>) {
    return __half2float(x);
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return __bfloat162float(x);
  } else {
    return static_cast<acc_t<T>>(x);
  }
}

// Converts a value of any arithmetic type into storage type T (bool: non-zero is true).
template <typename T, typename V>
__host__ __device__ __forceinline__ T store(V v) {
  if constexpr (std::is_same_v<T, half_t>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    return __float2bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != V(0);
  } else {
    return static_cast<T>(v);
  }
}

// The element offset of linear index i (row-major over arg's sizes) in a strided operand.
__device__ __forceinline__ int64_t offset_of(int64_t i, const TensorArg& t) {
  if (t.contiguous) return i;
  int64_t off = 0;
  for (int d = t.ndim - 1; d >= 0; --d) {
    const int64_t size = t.sizes[d];
    off += (i % size) * t.strides[d];
    i /= size;
  }
  return off;
}

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

#define TS_GRID_STRIDE(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

inline const char* dtype_label(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
  }
  return "an unknown dtype";
}

// A dtype the op does not take (as on the CPU: the floating ops take f32/f64/f16/bf16).
[[noreturn]] inline void fail_dtype(const char* op, DType dtype) {
  throw std::invalid_argument(std::string(op) + ": the CUDA backend does not support dtype " +
                              dtype_label(dtype) + " for this op");
}

#define TS_CUDA_CASE(ENUM, TYPE, ...)   \
  case ::tessera::DType::ENUM: {        \
    using scalar_t = TYPE;              \
    __VA_ARGS__();                      \
    break;                              \
  }

#define TS_CUDA_DISPATCH_FLOATING(DTYPE, NAME, ...)                    \
  switch (DTYPE) {                                                     \
    TS_CUDA_CASE(kF32, float, __VA_ARGS__)                             \
    TS_CUDA_CASE(kF64, double, __VA_ARGS__)                            \
    TS_CUDA_CASE(kF16, ::tessera::cuda::half_t, __VA_ARGS__)           \
    TS_CUDA_CASE(kBF16, ::tessera::cuda::bf16_t, __VA_ARGS__)          \
    default:                                                           \
      ::tessera::cuda::fail_dtype(NAME, DTYPE);                        \
  }

#define TS_CUDA_DISPATCH_ALL(DTYPE, NAME, ...)                         \
  switch (DTYPE) {                                                     \
    TS_CUDA_CASE(kF32, float, __VA_ARGS__)                             \
    TS_CUDA_CASE(kF64, double, __VA_ARGS__)                            \
    TS_CUDA_CASE(kF16, ::tessera::cuda::half_t, __VA_ARGS__)           \
    TS_CUDA_CASE(kBF16, ::tessera::cuda::bf16_t, __VA_ARGS__)          \
    TS_CUDA_CASE(kI64, int64_t, __VA_ARGS__)                           \
    TS_CUDA_CASE(kI32, int32_t, __VA_ARGS__)                           \
    TS_CUDA_CASE(kU8, uint8_t, __VA_ARGS__)                            \
    TS_CUDA_CASE(kBool, bool, __VA_ARGS__)                             \
    default:                                                           \
      ::tessera::cuda::fail_dtype(NAME, DTYPE);                        \
  }

}  // namespace cuda
}  // namespace tessera
