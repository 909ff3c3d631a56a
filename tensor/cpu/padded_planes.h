// The zero-padded input planes the direct 3x3 kernels read: each channel of one image becomes
// (h + 2) rows of s = w + 2 floats (one zero column either side, one zero row above and below),
// stored as one flat run, so output (y, x) and its tap (i, j) are s * (y + i) + x + j apart
// from the plane's start.
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

}  // namespace cpu
}  // namespace tessera
