#include "tensor/cpu/direct_conv3x3.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// XC floats as one GCC vector (the compiler splits it into the target's registers: two zmm
// for 32 floats with AVX-512, four ymm with AVX2). The attribute must sit on a typedef inside a
// class template: on an alias template GCC drops it, silently leaving a plain float.
template <int XC>
struct VecOf {
  typedef float type __attribute__((vector_size(XC * sizeof(float))));
};
template <int XC>
using Vec = typename VecOf<XC>::type;
static_assert(sizeof(Vec<32>) == 32 * sizeof(float), "Vec must be a real vector type");

template <int XC>
inline __attribute__((always_inline)) Vec<XC> load(const float* p) {
  Vec<XC> v;
  std::memcpy(&v, p, sizeof(v));  // an unaligned vector load
  return v;
}

// Pads every channel plane of one image into xp: (h + 2) rows of `stride` floats, the image at
// row 1, column 1, zeros around it.
inline __attribute__((always_inline)) void pad_image(const float* x, int64_t c, int64_t h,
                                                     int64_t wd, int64_t stride, float* xp) {
  std::fill(xp, xp + c * (h + 2) * stride, 0.0f);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t r = 0; r < h; ++r) {
      std::memcpy(xp + (ci * (h + 2) + r + 1) * stride + 1, x + (ci * h + r) * wd,
                  wd * sizeof(float));
    }
  }
}

// One output row segment: y[k0 .. k0+KB)[row][x0 .. x0+XC) from the padded input xp, whose
// channel planes are (h + 2) rows of `stride` floats. The KB sums stay in registers while
// every input channel and tap is added in.
template <int KB, int XC>
inline __attribute__((always_inline)) void row_block(const float* xp, const float* w,
                                                     const float* bias, float* y, int64_t c,
                                                     int64_t h, int64_t wd, int64_t stride,
                                                     int64_t k0, int64_t row, int64_t x0) {
  Vec<XC> acc[KB];
#pragma GCC unroll 16
  for (int kb = 0; kb < KB; ++kb) {
    const float b = bias != nullptr ? bias[k0 + kb] : 0.0f;
    acc[kb] = b - Vec<XC>{};  // broadcast
  }
  const int64_t plane = (h + 2) * stride;
  const float* wk = w + k0 * c * 9;
  for (int64_t ci = 0; ci < c; ++ci) {
    const float* base = xp + ci * plane + row * stride + x0;
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
#pragma GCC unroll 3
      for (int j = 0; j < 3; ++j) {
        const Vec<XC> in = load<XC>(base + i * stride + j);
#pragma GCC unroll 16
        for (int kb = 0; kb < KB; ++kb) acc[kb] += wk[(kb * c + ci) * 9 + i * 3 + j] * in;
      }
    }
  }
  const int64_t n = std::min<int64_t>(XC, wd - x0);
  for (int kb = 0; kb < KB; ++kb) {
    std::memcpy(y + ((k0 + kb) * h + row) * wd + x0, &acc[kb], n * sizeof(float));
  }
}

// One image: pads it into xp, then covers every (channel block, row, column chunk).
template <int KB, int XC>
inline __attribute__((always_inline)) void image(const float* x, const float* w,
                                                 const float* bias, float* y, int64_t c,
                                                 int64_t k, int64_t h, int64_t wd, float* xp) {
  const int64_t chunks = (wd + XC - 1) / XC, stride = chunks * XC + 2;
  pad_image(x, c, h, wd, stride, xp);
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    for (int64_t row = 0; row < h; ++row) {
      for (int64_t q = 0; q < chunks; ++q) {
        row_block<KB, XC>(xp, w, bias, y, c, h, wd, stride, k0, row, q * XC);
      }
    }
  }
}

// Weight gradient of a block of images, added into dw[k][c][9]: for each pair of KB output
// channels and one input channel, 9 * KB vector sums (one per tap and channel) run over every
// image, row and column chunk of dy (zero beyond the width in dyp) against the shifted input
// rows, and are reduced across lanes once per block.
template <int KB, int XC>
inline __attribute__((always_inline)) void weight_block(const float* dyp, const float* xp,
                                                        float* dw, int64_t count, int64_t c,
                                                        int64_t k, int64_t h, int64_t chunks,
                                                        int64_t stride) {
  const int64_t ystride = chunks * XC;
  const int64_t x_image = c * (h + 2) * stride, dy_image = k * h * ystride;
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    for (int64_t ci = 0; ci < c; ++ci) {
      Vec<XC> acc[KB][9];
#pragma GCC unroll 16
      for (int kb = 0; kb < KB; ++kb) {
#pragma GCC unroll 9
        for (int t = 0; t < 9; ++t) acc[kb][t] = Vec<XC>{};
      }
      for (int64_t im = 0; im < count; ++im) {
        const float* plane = xp + im * x_image + ci * (h + 2) * stride;
        const float* grad = dyp + im * dy_image + k0 * h * ystride;
        for (int64_t row = 0; row < h; ++row) {
          for (int64_t q = 0; q < chunks; ++q) {
            Vec<XC> g[KB];
#pragma GCC unroll 16
            for (int kb = 0; kb < KB; ++kb) {
              g[kb] = load<XC>(grad + (kb * h + row) * ystride + q * XC);
            }
#pragma GCC unroll 3
            for (int i = 0; i < 3; ++i) {
#pragma GCC unroll 3
              for (int j = 0; j < 3; ++j) {
                const Vec<XC> in = load<XC>(plane + (row + i) * stride + q * XC + j);
#pragma GCC unroll 16
                for (int kb = 0; kb < KB; ++kb) acc[kb][i * 3 + j] += g[kb] * in;
              }
            }
          }
        }
      }
      for (int kb = 0; kb < KB; ++kb) {
        for (int t = 0; t < 9; ++t) {
          float lanes[XC];
          std::memcpy(lanes, &acc[kb][t], sizeof(lanes));
          float total = 0;
          for (int l = 0; l < XC; ++l) total += lanes[l];
          dw[((k0 + kb) * c + ci) * 9 + t] += total;
        }
      }
    }
  }
}

// The instruction-set variants. Each inlines the same template body compiled for its target.
#define TS_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

TS_ISA_CLONES void image_k8_x32(const float* x, const float* w, const float* bias, float* y,
                                int64_t c, int64_t k, int64_t h, int64_t wd, float* xp) {
  image<8, 32>(x, w, bias, y, c, k, h, wd, xp);
}

TS_ISA_CLONES void image_k16_x16(const float* x, const float* w, const float* bias, float* y,
                                 int64_t c, int64_t k, int64_t h, int64_t wd, float* xp) {
  image<16, 16>(x, w, bias, y, c, k, h, wd, xp);
}

TS_ISA_CLONES void image_k16_x8(const float* x, const float* w, const float* bias, float* y,
                                int64_t c, int64_t k, int64_t h, int64_t wd, float* xp) {
  image<16, 8>(x, w, bias, y, c, k, h, wd, xp);
}

// Column chunk for the weight gradient: 16 floats, or 8 for narrow images.
inline int64_t weight_chunk(int64_t wd) { return wd > 8 ? 16 : 8; }

// A block of images: pads their inputs and gradients, then adds the block's weight gradient.
TS_ISA_CLONES void weight_images(const float* dy, const float* x, float* dw, int64_t count,
                                 int64_t c, int64_t k, int64_t h, int64_t wd, float* xp,
                                 float* dyp) {
  const int64_t xc = weight_chunk(wd);
  const int64_t chunks = (wd + xc - 1) / xc, stride = chunks * xc + 2, ystride = chunks * xc;
  for (int64_t im = 0; im < count; ++im) {
    pad_image(x + im * c * h * wd, c, h, wd, stride, xp + im * c * (h + 2) * stride);
    float* grad = dyp + im * k * h * ystride;
    std::fill(grad, grad + k * h * ystride, 0.0f);
    for (int64_t r = 0; r < k * h; ++r) {
      std::memcpy(grad + r * ystride, dy + im * k * h * wd + r * wd, wd * sizeof(float));
    }
  }
  if (xc == 16) {
    if (k % 2 == 0) return weight_block<2, 16>(dyp, xp, dw, count, c, k, h, chunks, stride);
    return weight_block<1, 16>(dyp, xp, dw, count, c, k, h, chunks, stride);
  }
  if (k % 2 == 0) return weight_block<2, 8>(dyp, xp, dw, count, c, k, h, chunks, stride);
  weight_block<1, 8>(dyp, xp, dw, count, c, k, h, chunks, stride);
}

}  // namespace

bool direct_conv3x3_applies(int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                            int64_t dilation_w, int64_t groups) {
  return out_channels % 8 == 0 && kh == 3 && kw == 3 && stride_h == 1 && stride_w == 1 && pad_h == 1 && pad_w == 1 &&
         dilation_h == 1 && dilation_w == 1 && groups == 1;
}

void direct_conv3x3(const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t c, int64_t k, int64_t h, int64_t wd) {
  // Column chunk and channel block by width: narrow images take more channels per block, so
  // the registers stay full. Channel blocks must divide k; otherwise use 8, else 16 below.
  int xc = wd > 16 ? 32 : wd > 8 ? 16 : 8;
  int kb = xc == 32 ? 8 : 16;
  if (k % kb != 0) {
    xc = 32;
    kb = 8;
  }
  const int64_t stride = (wd + xc - 1) / xc * xc + 2;
  parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> xp(c * (h + 2) * stride);
    for (int64_t i = i0; i < i1; ++i) {
      const float* xi = x + i * c * h * wd;
      float* yi = y + i * k * h * wd;
      if (xc == 32) {
        image_k8_x32(xi, w, bias, yi, c, k, h, wd, xp.data());
      } else if (xc == 16) {
        image_k16_x16(xi, w, bias, yi, c, k, h, wd, xp.data());
      } else {
        image_k16_x8(xi, w, bias, yi, c, k, h, wd, xp.data());
      }
    }
  });
}

void direct_conv3x3_backward_weight(const float* dy, const float* x, float* dw, int64_t n,
                                    int64_t c, int64_t k, int64_t h, int64_t wd) {
  constexpr int64_t kImagesPerBlock = 8;  // fixed, so the order of the sums is too
  const int64_t blocks = (n + kImagesPerBlock - 1) / kImagesPerBlock;
  const int64_t xc = weight_chunk(wd), chunks = (wd + xc - 1) / xc;
  const int64_t stride = chunks * xc + 2, weight_size = k * c * 9;
  std::vector<float> partial(blocks * weight_size, 0.0f);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> xp(kImagesPerBlock * c * (h + 2) * stride);
    std::vector<float> dyp(kImagesPerBlock * k * h * chunks * xc);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t first = b * kImagesPerBlock, count = std::min(kImagesPerBlock, n - first);
      weight_images(dy + first * k * h * wd, x + first * c * h * wd,
                    partial.data() + b * weight_size, count, c, k, h, wd, xp.data(), dyp.data());
    }
  });
  std::memcpy(dw, partial.data(), weight_size * sizeof(float));
  for (int64_t b = 1; b < blocks; ++b) {
    const float* p = partial.data() + b * weight_size;
    for (int64_t i = 0; i < weight_size; ++i) dw[i] += p[i];
  }
}

}  // namespace cpu
}  // namespace tessera
