// The two primitives causal attention's blocks are made of (tensor/cpu/attention.cc), for the
// CPU's vector units and in plain C++:
//
//   mm:       C (+)= alpha * A B on one block, A read by (row, column) strides, B and C by rows
//   exp_sub:  X[c][r] = exp(X[c][r] - s[r]) over a block of scores
//
// mm broadcasts one element of A at a time and multiplies it into whole vectors of a row of B,
// so A may be any strided view (a block of K, or of V read transposed: A(d, c) = V[c][d]) while
// B and C are read and written in vectors of L floats along their rows:
//
//             B  [K x N], rows of N/L vectors
//            +--+--+--+--+
//     A(m,k) |b0|b1|b2|b3|  row k
//       |    +--+--+--+--+
//       v         x A(m,k) broadcast, for the R rows m of the tile
//     C  [R x 4 vectors]: R * 4 sums stay in registers over the whole k loop
//
// A tile of 4 rows x 4 vectors keeps 16 sums in registers and does 16 FMAs per 4 loads of B
// and 4 broadcasts of A. N must be a multiple of L: callers pad their rows (zeros, or values
// nobody reads), which is why the blocks' scratch rows are rounded up to L.
//
// exp is Cephes' single-precision polynomial (relative error about 1e-7): range reduction
// x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r, and 2^n built in the exponent
// bits. Arguments below ln(FLT_MIN), -inf (masked scores) among them, give 0.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/cpu/simd_vec.h"

namespace tessera {
namespace cpu {
namespace attention {

// Plain loops: f64 (the gradient checks' dtype) and machines without AVX2.
template <typename T>
struct ScalarOps {
  using Scalar = T;
  static constexpr int kLanes = 1;

  static void mm(int64_t m, int64_t n, int64_t k, const T* a, int64_t sam, int64_t sak,
                 const T* b, int64_t ldb, T* c, int64_t ldc, T alpha, bool accumulate) {
    for (int64_t i = 0; i < m; ++i) {
      T* ci = c + i * ldc;
      if (!accumulate) {
        for (int64_t j = 0; j < n; ++j) ci[j] = 0;
      }
      for (int64_t p = 0; p < k; ++p) {
        const T aip = alpha * a[i * sam + p * sak];
        const T* bp = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      }
    }
  }

  static void exp_sub(int64_t rows, int64_t n, T* x, int64_t ldx, const T* s) {
    for (int64_t c = 0; c < rows; ++c) {
      for (int64_t r = 0; r < n; ++r) x[c * ldx + r] = std::exp(x[c * ldx + r] - s[r]);
    }
  }
};

template <int L>
struct SimdOps {
  using Scalar = float;
  using V = simd::VecT<L>;
  static constexpr int kLanes = L;

  // One tile: R rows of C by NV vectors.
  template <int R, int NV>
  static TS_SIMD_INLINE void tile(int64_t k, const float* a, int64_t sam, int64_t sak,
                                  const float* b, int64_t ldb, float* c, int64_t ldc,
                                  float alpha, bool accumulate) {
    V acc[R][NV];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = V{};
    }
    for (int64_t p = 0; p < k; ++p) {
      V bv[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) bv[j] = simd::load<L>(b + p * ldb + j * L);
      const float* ap = a + p * sak;
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const V ai = V{} + ap[i * sam];
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) acc[i][j] += ai * bv[j];
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        float* cij = c + i * ldc + j * L;
        V r = acc[i][j] * alpha;
        if (accumulate) r += simd::load<L>(cij);
        simd::store<L>(cij, r);
      }
    }
  }

  template <int R>
  static TS_SIMD_INLINE void row_tiles(int64_t n, int64_t k, const float* a, int64_t sam,
                                       int64_t sak, const float* b, int64_t ldb, float* c,
                                       int64_t ldc, float alpha, bool accumulate) {
    int64_t j = 0;
    for (; j + 4 * L <= n; j += 4 * L) {
      tile<R, 4>(k, a, sam, sak, b + j, ldb, c + j, ldc, alpha, accumulate);
    }
    switch ((n - j) / L) {
      case 3: tile<R, 3>(k, a, sam, sak, b + j, ldb, c + j, ldc, alpha, accumulate); break;
      case 2: tile<R, 2>(k, a, sam, sak, b + j, ldb, c + j, ldc, alpha, accumulate); break;
      case 1: tile<R, 1>(k, a, sam, sak, b + j, ldb, c + j, ldc, alpha, accumulate); break;
      default: break;
    }
  }

  static TS_SIMD_INLINE void mm(int64_t m, int64_t n, int64_t k, const float* a, int64_t sam,
                                int64_t sak, const float* b, int64_t ldb, float* c,
                                int64_t ldc, float alpha, bool accumulate) {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      row_tiles<4>(n, k, a + i * sam, sam, sak, b, ldb, c + i * ldc, ldc, alpha, accumulate);
    }
    const float* ai = a + i * sam;
    float* ci = c + i * ldc;
    switch (m - i) {
      case 3: row_tiles<3>(n, k, ai, sam, sak, b, ldb, ci, ldc, alpha, accumulate); break;
      case 2: row_tiles<2>(n, k, ai, sam, sak, b, ldb, ci, ldc, alpha, accumulate); break;
      case 1: row_tiles<1>(n, k, ai, sam, sak, b, ldb, ci, ldc, alpha, accumulate); break;
      default: break;
    }
  }

  static TS_SIMD_INLINE V exp(V x) {
    const V lo = V{} - 87.33654475f, hi = V{} + 88.37626266f;
    const V xc = x < lo ? lo : (x > hi ? hi : x);
    // n = round(x / ln2): adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
    const V magic = V{} + 12582912.0f;
    const V n = (xc * 1.44269504089f + magic) - magic;
    // r = x - n ln2, with ln2 in two parts so that n ln2 is exact to float precision.
    const V r = xc - n * 0.693359375f + n * 2.12194440e-4f;
    V p = V{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const V er = p * r * r + r + 1.0f;
    const simd::IndexT<L> bits = (__builtin_convertvector(n, simd::IndexT<L>) + 127) << 23;
    const V y = er * (V)bits;  // a cast between vectors of one size keeps the bits
    return x < lo ? V{} : y;
  }

  // n is a multiple of L.
  static TS_SIMD_INLINE void exp_sub(int64_t rows, int64_t n, float* x, int64_t ldx,
                                     const float* s) {
    for (int64_t c = 0; c < rows; ++c) {
      for (int64_t r = 0; r < n; r += L) {
        float* xr = x + c * ldx + r;
        simd::store<L>(xr, exp(simd::load<L>(xr) - simd::load<L>(s + r)));
      }
    }
  }
};

}  // namespace attention
}  // namespace cpu
}  // namespace tessera
