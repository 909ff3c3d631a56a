#include "tensor/cpu/direct_conv3x3.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// Both kernels work on a *flattened padded plane*: each input channel is zero-padded to
// (h + 2) rows of s = w + 2 floats and read as one long row. Output (y, x) sits at flat
// position p = y s + x, and its tap (i, j) is input position p + i s + j, so a run of
// consecutive output positions needs consecutive input floats for every tap: one unaligned
// vector load each. The two positions per row with x >= w are junk and are dropped (forward)
// or multiplied by zero gradients (weight gradient). At 7x7 that keeps 49 of every 64 lanes
// busy, against 7 of 16 for vectors along one row.

constexpr int kLanes = 16;  // floats per vector (one zmm; two ymm with AVX2)

// kLanes floats as one GCC vector. The attribute must sit on a typedef inside a class
// template: on an alias template GCC drops it, silently leaving a plain float.
template <int N>
struct VecOf {
  typedef float type __attribute__((vector_size(N * sizeof(float))));
};
using Vec = VecOf<kLanes>::type;
static_assert(sizeof(Vec) == kLanes * sizeof(float), "Vec must be a real vector type");

inline __attribute__((always_inline)) Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));  // an unaligned vector load
  return v;
}

// Copies one short row (a few dozen floats): an inline loop the compiler vectorizes, cheaper
// than a library call per row.
inline __attribute__((always_inline)) void copy_row(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// The flattened geometry of one image's planes.
struct Flat {
  int64_t h, wd, s;   // rows, width, padded row stride (wd + 2)
  int64_t positions;  // output positions covered: whole blocks of `per_block` vectors
  int64_t plane;      // floats per padded input plane, with room for the last block's taps

  Flat(int64_t h_, int64_t wd_, int per_block = 1) : h(h_), wd(wd_), s(wd_ + 2) {
    const int64_t block = kLanes * per_block;
    positions = (h * s + block - 1) / block * block;
    plane = std::max((h + 2) * s, positions + 2 * s + 2);
  }
};

// Vectors of positions per forward block: the count (1 to 4) that wastes the fewest positions
// rounding h * s up to whole blocks (ties go to the larger block, which reuses each weight
// broadcast over more positions).
inline int forward_vectors_per_block(int64_t h, int64_t wd) {
  const int64_t vectors = (h * (wd + 2) + kLanes - 1) / kLanes;
  int best = 1;
  int64_t best_waste = 0;
  for (int p = 1; p <= 4; ++p) {
    const int64_t waste = (vectors + p - 1) / p * p - vectors;
    if (waste <= best_waste) {
      best = p;
      best_waste = waste;
    }
  }
  return best;
}

// Pads c planes of one image into xp (c * f.plane floats): the image at row 1, column 1.
inline __attribute__((always_inline)) void pad_planes(const float* x, int64_t c, const Flat& f,
                                                      float* xp) {
  std::fill(xp, xp + c * f.plane, 0.0f);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t r = 0; r < f.h; ++r) {
      copy_row(xp + ci * f.plane + (r + 1) * f.s + 1, x + (ci * f.h + r) * f.wd, f.wd);
    }
  }
}

// Forward of one image: for each block of KB output channels and each block of P vectors of
// positions, the KB x P sums stay in registers while every input channel and tap is added in
// (each weight broadcast serves P vectors, each input load KB channels); then the valid columns
// of each row are copied out of the flat result.
template <int KB, int P>
inline __attribute__((always_inline)) void forward_image(const float* x, const float* w,
                                                         const float* bias, float* y, int64_t c,
                                                         int64_t k, const Flat& f, float* xp,
                                                         float* flat_out) {
  pad_planes(x, c, f, xp);
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    const float* wk = w + k0 * c * 9;
    for (int64_t p = 0; p < f.positions; p += P * kLanes) {
      Vec acc[KB][P];
#pragma GCC unroll 16
      for (int kb = 0; kb < KB; ++kb) {
        const float b = bias != nullptr ? bias[k0 + kb] : 0.0f;
#pragma GCC unroll 4
        for (int v = 0; v < P; ++v) acc[kb][v] = b - Vec{};  // broadcast
      }
      for (int64_t ci = 0; ci < c; ++ci) {
        const float* base = xp + ci * f.plane + p;
#pragma GCC unroll 3
        for (int i = 0; i < 3; ++i) {
#pragma GCC unroll 3
          for (int j = 0; j < 3; ++j) {
            Vec in[P];
#pragma GCC unroll 4
            for (int v = 0; v < P; ++v) in[v] = load(base + i * f.s + j + v * kLanes);
#pragma GCC unroll 16
            for (int kb = 0; kb < KB; ++kb) {
              const float wv = wk[(kb * c + ci) * 9 + i * 3 + j];
#pragma GCC unroll 4
              for (int v = 0; v < P; ++v) acc[kb][v] += wv * in[v];
            }
          }
        }
      }
      for (int kb = 0; kb < KB; ++kb) {
        std::memcpy(flat_out + kb * f.positions + p, &acc[kb][0], sizeof(acc[kb]));
      }
    }
    for (int kb = 0; kb < KB; ++kb) {
      for (int64_t r = 0; r < f.h; ++r) {
        copy_row(y + ((k0 + kb) * f.h + r) * f.wd, flat_out + kb * f.positions + r * f.s, f.wd);
      }
    }
  }
}

// Weight gradient of a block of images, added into dw[k][c][9], for the taps in kernel rows
// [I0, I0 + NI): for each group of KB output channels and one input channel, KB * 3 * NI
// vector sums (one per tap and channel) run over every image and vector of positions (the
// gradient is zero at the junk positions), and are reduced across lanes once per block. More
// channels per group share each input load; fewer rows per pass keep the sums in registers.
template <int KB, int I0, int NI>
inline __attribute__((always_inline)) void weight_block(const float* dyp, const float* xp,
                                                        float* dw, int64_t count, int64_t c,
                                                        int64_t k, const Flat& f) {
  constexpr int kTaps = 3 * NI;
  const int64_t x_image = c * f.plane, dy_image = k * f.positions;
  for (int64_t k0 = 0; k0 < k; k0 += KB) {
    for (int64_t ci = 0; ci < c; ++ci) {
      Vec acc[KB][kTaps];
#pragma GCC unroll 16
      for (int kb = 0; kb < KB; ++kb) {
#pragma GCC unroll 9
        for (int t = 0; t < kTaps; ++t) acc[kb][t] = Vec{};
      }
      for (int64_t im = 0; im < count; ++im) {
        const float* plane = xp + im * x_image + ci * f.plane;
        const float* grad = dyp + im * dy_image + k0 * f.positions;
        for (int64_t p = 0; p < f.positions; p += kLanes) {
          Vec g[KB];
#pragma GCC unroll 16
          for (int kb = 0; kb < KB; ++kb) g[kb] = load(grad + kb * f.positions + p);
#pragma GCC unroll 3
          for (int i = 0; i < NI; ++i) {
#pragma GCC unroll 3
            for (int j = 0; j < 3; ++j) {
              const Vec in = load(plane + p + (I0 + i) * f.s + j);
#pragma GCC unroll 16
              for (int kb = 0; kb < KB; ++kb) acc[kb][i * 3 + j] += g[kb] * in;
            }
          }
        }
      }
      for (int kb = 0; kb < KB; ++kb) {
        for (int t = 0; t < kTaps; ++t) {
          float lanes[kLanes];
          std::memcpy(lanes, &acc[kb][t], sizeof(lanes));
          float total = 0;
          for (int l = 0; l < kLanes; ++l) total += lanes[l];
          dw[((k0 + kb) * c + ci) * 9 + I0 * 3 + t] += total;
        }
      }
    }
  }
}

// The instruction-set variants: each inlines the template bodies compiled for its target.
#define TS_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

TS_ISA_CLONES void forward_images(const float* x, const float* w, const float* bias, float* y,
                                  int64_t first, int64_t count, int64_t c, int64_t k, int64_t h,
                                  int64_t wd, float* xp, float* flat_out) {
  const int p = forward_vectors_per_block(h, wd);
  const Flat f(h, wd, p);
  const bool by16 = k % 16 == 0;
  // KB x P accumulators (16 to 24) fit AVX-512's 32 vector registers with room for the inputs;
  // k is a multiple of 8.
  for (int64_t i = first; i < first + count; ++i) {
    const float* xi = x + i * c * h * wd;
    float* yi = y + i * k * h * wd;
    switch (p) {
      case 4: forward_image<4, 4>(xi, w, bias, yi, c, k, f, xp, flat_out); break;
      case 3: forward_image<8, 3>(xi, w, bias, yi, c, k, f, xp, flat_out); break;
      case 2: forward_image<8, 2>(xi, w, bias, yi, c, k, f, xp, flat_out); break;
      default:
        if (by16) {
          forward_image<16, 1>(xi, w, bias, yi, c, k, f, xp, flat_out);
        } else {
          forward_image<8, 1>(xi, w, bias, yi, c, k, f, xp, flat_out);
        }
    }
  }
}

// A block of images: pads their inputs and gradients, then adds the block's weight gradient.
TS_ISA_CLONES void weight_images(const float* dy, const float* x, float* dw, int64_t count,
                                 int64_t c, int64_t k, int64_t h, int64_t wd, float* xp,
                                 float* dyp) {
  const Flat f(h, wd);
  for (int64_t im = 0; im < count; ++im) {
    pad_planes(x + im * c * h * wd, c, f, xp + im * c * f.plane);
    // The gradient in the flat layout (row stride s, zeros at the junk positions).
    float* grad = dyp + im * k * f.positions;
    std::fill(grad, grad + k * f.positions, 0.0f);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t r = 0; r < h; ++r) {
        copy_row(grad + kk * f.positions + r * f.s, dy + ((im * k + kk) * h + r) * wd, wd);
      }
    }
  }
  if (k % 4 == 0) {  // 4 channels: kernel rows 0-1 (24 sums), then row 2 (12 sums)
    weight_block<4, 0, 2>(dyp, xp, dw, count, c, k, f);
    return weight_block<4, 2, 1>(dyp, xp, dw, count, c, k, f);
  }
  if (k % 2 == 0) return weight_block<2, 0, 3>(dyp, xp, dw, count, c, k, f);
  weight_block<1, 0, 3>(dyp, xp, dw, count, c, k, f);
}

}  // namespace

bool direct_conv3x3_applies(int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                            int64_t dilation_w, int64_t groups) {
  return out_channels % 8 == 0 && kh == 3 && kw == 3 && stride_h == 1 && stride_w == 1 &&
         pad_h == 1 && pad_w == 1 && dilation_h == 1 && dilation_w == 1 && groups == 1;
}

void direct_conv3x3(const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t c, int64_t k, int64_t h, int64_t wd) {
  const Flat f(h, wd, forward_vectors_per_block(h, wd));
  parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> xp(c * f.plane), flat_out(16 * f.positions);
    forward_images(x, w, bias, y, i0, i1 - i0, c, k, h, wd, xp.data(), flat_out.data());
  });
}

void direct_conv3x3_backward_weight(const float* dy, const float* x, float* dw, int64_t n,
                                    int64_t c, int64_t k, int64_t h, int64_t wd) {
  const Flat f(h, wd);
  // Images per block: enough positions (about 2048) to amortize the lane reductions, 8 to 32.
  // It depends on the shape only, so the order of the sums, and the result, never depends on
  // the thread count.
  const int64_t kImagesPerBlock = std::min<int64_t>(32, std::max<int64_t>(8, 2048 / f.positions));
  const int64_t blocks = (n + kImagesPerBlock - 1) / kImagesPerBlock, weight_size = k * c * 9;
  std::vector<float> partial(blocks * weight_size, 0.0f);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> xp(kImagesPerBlock * c * f.plane), dyp(kImagesPerBlock * k * f.positions);
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
