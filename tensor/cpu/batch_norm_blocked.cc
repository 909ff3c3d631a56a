// Batch norm on channels-blocked activations (nChw16c): each (image, block of 16 channels) is a
// panel of S = H*W rows of 16 floats, one row per position, its 16 lanes 16 channels. So the
// per-channel arithmetic of batch_norm.cc (formulas there) runs on whole rows at once: one
// simd::Vec of 16 floats (a zmm register with AVX-512, a few narrower ones otherwise), with the
// 16 channels' scale and shift, or their sums, held lane for lane.
//
// Sums: each block's rows, image by image, add into 16 f32 accumulators a chunk of kChunk rows
// at a time, each chunk's sums then into f64. Threads split the blocks of channels, and every
// block adds its chunks in the same order, so results do not depend on the thread count.
// The backward runs its two passes (sums, then the gradient) a block at a time, the block's
// rows of all images read twice while they are still in the caches.
#include "tensor/cpu/batch_norm_blocked.h"

#include <algorithm>

#include "tensor/cpu/simd_vec.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

using simd::Vec;
constexpr int64_t kLanes = 16;   // channels per block: the 16c of nChw16c, one Vec
static_assert(simd::kLanes == kLanes, "a row of a block is one simd::Vec");
constexpr int64_t kChunk = 256;  // rows summed in f32 before their sums go into f64

struct Blocks {
  int64_t n, b, s;  // images, blocks of 16 channels, positions per image
};
Blocks blocks_of(const Tensor& x) { return {x.size(0), x.size(1) / kLanes, x.size(2) * x.size(3)}; }

float* data_of(const Tensor& t) {
  TS_INTERNAL_ASSERT(t.is_channels_blocked() && t.dtype() == kF32);
  return t.channel_blocks().data<float>();
}

// Tasks of whole panels or blocks with at least ~16K values each, so small layers do not pay
// for a parallel region.
int64_t grain_for(int64_t values_per_item) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, values_per_item));
}

// The 16 channels of block b of a per-channel f32 tensor (or `fill` where it is undefined).
Vec lanes_of(const float* p, int64_t b, float fill) {
  if (p != nullptr) return simd::load(p + b * kLanes);
  Vec v;
  for (int64_t l = 0; l < kLanes; ++l) v[l] = fill;
  return v;
}

Vec zeros() { return Vec{}; }

// Per-lane sums over block b's rows of all images: add_row(r, &a, &c) adds row r's
// contributions (r counts rows of 16 from the tensor's start) into the f32 vectors a and c.
template <typename AddRow>
void block_sums(const Blocks& d, int64_t b, AddRow add_row, double* s1, double* s2) {
  std::fill(s1, s1 + kLanes, 0.0);
  std::fill(s2, s2 + kLanes, 0.0);
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t panel = (i * d.b + b) * d.s;
    for (int64_t j0 = 0; j0 < d.s; j0 += kChunk) {
      Vec a = zeros(), c = zeros();
      const int64_t j1 = std::min(d.s, j0 + kChunk);
      for (int64_t j = j0; j < j1; ++j) add_row(panel + j, &a, &c);
      for (int64_t l = 0; l < kLanes; ++l) {
        s1[l] += a[l];
        s2[l] += c[l];
      }
    }
  }
}

template <bool kRelu, bool kResidual>
void apply_panel(const float* x, const float* res, float* y, int64_t s, Vec scale, Vec shift) {
  const Vec zero = zeros();
  for (int64_t j = 0; j < s * kLanes; j += kLanes) {
    Vec v = simd::load(x + j) * scale + shift;
    if constexpr (kResidual) v += simd::load(res + j);
    if constexpr (kRelu) v = v > zero ? v : zero;
    simd::store<kLanes>(y + j, v);
  }
}

}  // namespace

void batch_norm_stats_blocked(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const Blocks d = blocks_of(x);
  const float* px = data_of(x);
  float* pm = mean.data<float>();
  float* pv = var.data<float>();
  const double count = static_cast<double>(d.n * d.s);
  // One pass: sum and sum of squares (activations are O(1), so E[x^2] - E[x]^2 keeps f32
  // precision, as in batch_norm.cc).
  parallel_for(d.b, grain_for(d.n * d.s * kLanes), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      double sum[kLanes], sum_sq[kLanes];
      block_sums(
          d, b,
          [&](int64_t r, Vec* a, Vec* c) {
            const Vec v = simd::load(px + r * kLanes);
            *a += v;
            *c += v * v;
          },
          sum, sum_sq);
      for (int64_t l = 0; l < kLanes; ++l) {
        const double m = sum[l] / count;
        pm[b * kLanes + l] = static_cast<float>(m);
        pv[b * kLanes + l] = static_cast<float>(std::max(0.0, sum_sq[l] / count - m * m));
      }
    }
  });
}

void batch_norm_apply_blocked(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                              const Tensor& weight, const Tensor& bias, const Tensor& residual,
                              bool relu, const Tensor& out) {
  const Blocks d = blocks_of(x);
  const float* px = data_of(x);
  const float* pr = residual.defined() ? data_of(residual) : nullptr;
  float* py = data_of(out);
  const float* pm = mean.data<float>();
  const float* pi = invstd.data<float>();
  const float* pw = weight.defined() ? weight.data<float>() : nullptr;
  const float* pb = bias.defined() ? bias.data<float>() : nullptr;
  parallel_for(d.n * d.b, grain_for(d.s * kLanes), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t % d.b;
      // y = x * scale + shift, with scale = w * invstd and shift = b - mean * scale.
      const Vec scale = lanes_of(pw, b, 1.0f) * simd::load(pi + b * kLanes);
      const Vec shift = lanes_of(pb, b, 0.0f) - simd::load(pm + b * kLanes) * scale;
      const int64_t at = t * d.s * kLanes;
      const float* res = pr ? pr + at : nullptr;
      if (relu && res) apply_panel<true, true>(px + at, res, py + at, d.s, scale, shift);
      else if (relu) apply_panel<true, false>(px + at, res, py + at, d.s, scale, shift);
      else if (res) apply_panel<false, true>(px + at, res, py + at, d.s, scale, shift);
      else apply_panel<false, false>(px + at, res, py + at, d.s, scale, shift);
    }
  });
}

void batch_norm_backward_blocked(const Tensor& grad_out, const Tensor& relu_out,
                                 const Tensor& masked, const Tensor& x, const Tensor& mean,
                                 const Tensor& invstd, const Tensor& weight, bool training,
                                 const Tensor& grad_in, const Tensor& grad_weight,
                                 const Tensor& grad_bias) {
  const Blocks d = blocks_of(x);
  const float* px = data_of(x);
  const float* pg = data_of(grad_out);
  const float* py = relu_out.defined() ? data_of(relu_out) : nullptr;
  float* pgm = py ? data_of(masked) : nullptr;
  // The gradient pass reads the masked gradient where there is a ReLU.
  const float* grad = py ? pgm : pg;
  float* pdx = grad_in.defined() ? data_of(grad_in) : nullptr;
  const float* pm = mean.data<float>();
  const float* pi = invstd.data<float>();
  const float* pw = weight.defined() ? weight.data<float>() : nullptr;
  float* gw = grad_weight.defined() ? grad_weight.data<float>() : nullptr;
  float* gb = grad_weight.defined() ? grad_bias.data<float>() : nullptr;
  const double count = static_cast<double>(d.n * d.s);
  const Vec zero = zeros();
  parallel_for(d.b, grain_for(d.n * d.s * kLanes), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const Vec m = simd::load(pm + b * kLanes);
      // The reduction pass: sum(g) and sum(g * (x - mean)), g masked by the ReLU's output
      // (and written) first where there is one.
      double sum_g[kLanes], sum_gx[kLanes];
      // (By value: the masked stores could otherwise alias the pointers, reloaded each row.)
      const auto add = [px, m](const Vec& g, int64_t r, Vec* a, Vec* c) {
        *a += g;
        *c += g * (simd::load(px + r * kLanes) - m);
      };
      if (py != nullptr) {
        block_sums(
            d, b,
            [pg, py, pgm, zero, add](int64_t r, Vec* a, Vec* c) {
              const Vec y = simd::load(py + r * kLanes);
              const Vec g = y > zero ? simd::load(pg + r * kLanes) : zero;
              simd::store<kLanes>(pgm + r * kLanes, g);
              add(g, r, a, c);
            },
            sum_g, sum_gx);
      } else {
        block_sums(
            d, b, [pg, add](int64_t r, Vec* a, Vec* c) { add(simd::load(pg + r * kLanes), r, a, c); },
            sum_g, sum_gx);
      }
      float mean_g[kLanes], proj[kLanes];
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t c = b * kLanes + l;
        sum_gx[l] *= pi[c];  // sum(g * xhat)
        if (gw != nullptr) {
          gw[c] = static_cast<float>(sum_gx[l]);
          gb[c] = static_cast<float>(sum_g[l]);
        }
        mean_g[l] = static_cast<float>(sum_g[l] / count);
        proj[l] = static_cast<float>(sum_gx[l] / count) * pi[c];  // multiplies (x - mean)
      }
      if (pdx == nullptr) continue;
      const Vec k = lanes_of(pw, b, 1.0f) * simd::load(pi + b * kLanes);
      const Vec mg = simd::load(mean_g), pj = simd::load(proj);
      // Images in the reverse order of the reduction pass: the last ones it read are the
      // likeliest still in L2.
      for (int64_t i = d.n - 1; i >= 0; --i) {
        const int64_t at = (i * d.b + b) * d.s * kLanes;
        const float* xr = px + at;
        const float* gr = grad + at;
        float* dr = pdx + at;
        if (!training) {  // mean and invstd are constants: dx = g * w * invstd
          for (int64_t j = 0; j < d.s * kLanes; j += kLanes) {
            simd::store<kLanes>(dr + j, simd::load(gr + j) * k);
          }
          continue;
        }
        for (int64_t j = 0; j < d.s * kLanes; j += kLanes) {
          const Vec g = simd::load(gr + j);
          simd::store<kLanes>(dr + j, k * (g - mg - (simd::load(xr + j) - m) * pj));
        }
      }
    }
  });
}

}  // namespace cpu
}  // namespace tessera
