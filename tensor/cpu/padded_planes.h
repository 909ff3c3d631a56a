// The zero-padded input planes the direct 3x3 kernels read: each channel of one image becomes
// (h + 2) rows of s = w + 2 floats (one zero column either side, one zero row above and below),
// stored as one flat run, so output (y, x) and its tap (i, j) are s * (y + i) + x + j apart
// from the plane's start (stride 1).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tensor/cpu/simd_vec.h"

namespace tessera {
namespace cpu {

// Pads the c planes at x (c x h x wd) into xp, `plane` floats apart (at least (h + 2) * s; any
// slack after the bottom row is zeroed too). Only the border is cleared: each row's right pad
// and the next row's left pad are the two floats after it.
TS_SIMD_INLINE void pad_planes(const float* x, int64_t c, int64_t h, int64_t wd, int64_t plane,
                               float* xp) {
  const int64_t s = wd + 2;
  for (int64_t ci = 0; ci < c; ++ci) {
    float* p = xp + ci * plane;
    std::fill(p, p + s + 1, 0.0f);
    for (int64_t r = 0; r < h; ++r) {
      float* row = p + (r + 1) * s + 1;
      simd::copy_row(row, x + (ci * h + r) * wd, wd);
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
inline void pad_planes_by_row_parity(const float* x, int64_t c, int64_t h, int64_t wd, int64_t s,
                                     int64_t plane, float* xp) {
  const int64_t even_rows = (h + 3) / 2;
  std::fill(xp, xp + c * plane, 0.0f);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t r = 0; r < h; ++r) {
      const int64_t padded = r + 1, stored = padded % 2 == 0 ? padded / 2 : even_rows + padded / 2;
      simd::copy_row(xp + ci * plane + stored * s + 1, x + (ci * h + r) * wd, wd);
    }
  }
}

}  // namespace cpu
}  // namespace tessera
