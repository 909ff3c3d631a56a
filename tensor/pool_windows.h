// The input windows of pooling outputs, shared by the CPU kernels (tensor/cpu/pool.cc) and the
// CUDA kernels (tensor/cuda/pool.cu). Dependency-free so nvcc can include it.
#pragma once

#include <cstdint>

#include "tensor/philox.h"  // TS_HOST_DEVICE

namespace tessera {

// PyTorch's avg_pool2d window of output (oy, ox): rows [y0, y1) and columns [x0, x1) of the
// input, and the divisor (the window clipped to the padded input when padding counts, to the
// real input otherwise).
struct AvgWindow {
  int64_t y0, y1, x0, x1, divisor;
};

TS_HOST_DEVICE inline AvgWindow avg_window(int64_t oy, int64_t ox, int64_t kh, int64_t kw,
                                           int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                                           int64_t h, int64_t w, bool count_include_pad) {
  int64_t y0 = oy * sh - ph, x0 = ox * sw - pw;
  int64_t y1 = y0 + kh < h + ph ? y0 + kh : h + ph;
  int64_t x1 = x0 + kw < w + pw ? x0 + kw : w + pw;
  const int64_t padded = (y1 - y0) * (x1 - x0);
  y0 = y0 > 0 ? y0 : 0;
  x0 = x0 > 0 ? x0 : 0;
  y1 = y1 < h ? y1 : h;
  x1 = x1 < w ? x1 : w;
  const int64_t divisor = count_include_pad ? padded : (y1 - y0) * (x1 - x0);
  return {y0, y1, x0, x1, divisor > 1 ? divisor : 1};
}

// Adaptive pooling: window i of `out` windows over `in` elements is [start, end).
TS_HOST_DEVICE inline int64_t adaptive_start(int64_t i, int64_t out, int64_t in) {
  return (i * in) / out;
}
TS_HOST_DEVICE inline int64_t adaptive_end(int64_t i, int64_t out, int64_t in) {
  return ((i + 1) * in + out - 1) / out;
}

}  // namespace tessera
