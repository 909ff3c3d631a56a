// Type dispatch for CPU kernels: runs a generic lambda with `scalar_t` bound to the C++ type of
// a DType, e.g.
//   TS_DISPATCH_FLOATING(t.dtype(), "softmax", [&] { softmax_rows<scalar_t>(...); });
#pragma once

#include "tensor/check.h"
#include "tensor/dtype.h"
#include "tensor/half.h"

#define TS_DISPATCH_CASE(ENUM, TYPE, ...) \
  case ::tessera::DType::ENUM: {          \
    using scalar_t = TYPE;                \
    __VA_ARGS__();                        \
    break;                                \
  }

#define TS_DISPATCH_FLOATING(DTYPE, NAME, ...)                                    \
  switch (DTYPE) {                                                                \
    TS_DISPATCH_CASE(kF32, float, __VA_ARGS__)                                    \
    TS_DISPATCH_CASE(kF64, double, __VA_ARGS__)                                   \
    TS_DISPATCH_CASE(kF16, ::tessera::Half, __VA_ARGS__)                          \
    TS_DISPATCH_CASE(kBF16, ::tessera::BFloat16, __VA_ARGS__)                     \
    default:                                                                      \
      TS_FAIL(NAME, ": takes floating dtypes (f32, f64, f16, bf16), got ", DTYPE); \
  }

#define TS_DISPATCH_ALL(DTYPE, NAME, ...)                       \
  switch (DTYPE) {                                              \
    TS_DISPATCH_CASE(kF32, float, __VA_ARGS__)                  \
    TS_DISPATCH_CASE(kF64, double, __VA_ARGS__)                 \
    TS_DISPATCH_CASE(kF16, ::tessera::Half, __VA_ARGS__)        \
    TS_DISPATCH_CASE(kBF16, ::tessera::BFloat16, __VA_ARGS__)   \
    TS_DISPATCH_CASE(kI64, int64_t, __VA_ARGS__)                \
    TS_DISPATCH_CASE(kI32, int32_t, __VA_ARGS__)                \
    TS_DISPATCH_CASE(kU8, uint8_t, __VA_ARGS__)                 \
    TS_DISPATCH_CASE(kBool, bool, __VA_ARGS__)                  \
    default:                                                    \
      TS_FAIL(NAME, ": unknown dtype ", DTYPE);                 \
  }
