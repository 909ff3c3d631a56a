// The zero-padded input planes the direct 3x3 kernels read: each channel of one image becomes
// (h + 2) rows of s = w + 2 floats (one zero column either side, one zero row above and below),
// stored as one flat run, so output (y, x) and its tap (i, j) are s * (y + i) + x + j apart
// from the plane's start (stride 1).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/simd_vec.h"

namespace tessera {
namespace cpu {

// One row of an input plane into the f32 padded planes: copied, or widened from f16/bf16 (so
// a half-precision input is converted as it is padded, with no widened copy of the tensor).
TS_SIMD_INLINE void load_row(float* dst, const float* src, int64_t n) {
  simd::copy_row(dst, src, n);
}
template <typename T>
inline void load_row(float* dst, const T* src, int64_t n) {
  widen(src, dst, n);
}

// One row of f32 results out to the output tensor: copied, or rounded to f16/bf16 once.
TS_SIMD_INLINE void store_row(float* dst, const float* src, int64_t n) {
  simd::copy_row(dst, src, n);
}
template <typename T>
inline void store_row(T* dst, const float* src, int64_t n) {
  narrow(src, dst, n);
}

// Pads the c planes at x (c x h x wd) into xp, `plane` floats apart (at least (h + 2) * s; any
// slack after the bottom row is zeroed too). Only the border is cleared: each row's right pad
// and the next row's left pad are the two floats after it.
template <typename T>
TS_SIMD_INLINE void pad_planes(const T* x, int64_t c, int64_t h, int64_t wd, int64_t plane,
                               float* xp) {
  const int64_t s = wd + 2;
  for (int64_t ci = 0; ci < c; ++ci) {
    float* p = xp + ci * plane;
    std::fill(p, p + s + 1, 0.0f);
    for (int64_t r = 0; r < h; ++r) {
      float* row = p + (r + 1) * s + 1;
      load_row(row, x + (ci * h + r) * wd, wd);
      row[wd] = 0.0f;
      row[wd + 1] = 0.0f;
    }
    std::fill(p + (h + 1) * s + 1, p + plane, 0.0f);
  }
}

// The inner step of every direct kernel: a run of U output positions, S input columns apart,
// reads one row of inputs through NJ kernel columns; input column t is column tap j of
// position u = (t - j) / S. Calls f(row[t], u, j) for each pair, so each input value is loaded
// once for all the sums it feeds. (Everything unrolls: u and j are constants in f.)
template <int S, int U, int NJ, typename F>
TS_SIMD_INLINE void for_each_tap(const float* row, F f) {
#pragma GCC unroll 33
  for (int t = 0; t < S * (U - 1) + NJ; ++t) {
    const float v = row[t];
#pragma GCC unroll 3
    for (int j = 0; j < NJ; ++j) {
      if (t >= j && (t - j) % S == 0 && (t - j) / S < U) f(v, (t - j) / S, j);
    }
  }
}

// The stride-2 layout: the same padded rows (row stride s >= wd + 2), the even ones (0, 2, ...)
// first and then the odd ones, so each kernel row of a stride-2 convolution reads its inputs
// from consecutive stored rows.
template <typename T>
inline void pad_planes_by_row_parity(const T* x, int64_t c, int64_t h, int64_t wd, int64_t s,
                                     int64_t plane, float* xp) {
  const int64_t even_rows = (h + 3) / 2;
  std::fill(xp, xp + c * plane, 0.0f);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t r = 0; r < h; ++r) {
      const int64_t padded = r + 1, stored = padded % 2 == 0 ? padded / 2 : even_rows + padded / 2;
      load_row(xp + ci * plane + stored * s + 1, x + (ci * h + r) * wd, wd);
    }
  }
}

}  // namespace cpu
}  // namespace tessera
