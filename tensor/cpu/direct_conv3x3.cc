#include "tensor/cpu/direct_conv3x3.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/cpu/padded_planes.h"
#include "tensor/cpu/simd_vec.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// The forward kernel (and, with flipped weights, the input gradient; the weight gradient is in
// direct_conv3x3_weight.cc) reads a *flattened padded plane* (padded_planes.h): output (y, x)
// sits at flat position p = y s + x, and its tap (i, j) at input position p + i s + j, so a
// tile of consecutive positions reads consecutive inputs for every tap. The two positions per
// row with x >= w are junk and are dropped when the result is copied out.
//
// The vector lanes are 16 output channels. A tile is 16 consecutive flat positions of one
// block of 16 output channels: 16 sums (one vector per position) stay in registers while, for
// each input channel and kernel row, the 3 taps' weight vectors are loaded once and each of
// the 18 input scalars the row touches is broadcast into up to 3 of the sums: 21 loads per 48
// FMAs. The finished tile is transposed 16 x 16 into one vector of positions per channel.

using simd::kLanes;
using simd::Vec;

// The flattened geometry of one image's planes.
struct Flat {
  int64_t h, wd, s;   // rows, width, padded row stride (wd + 2)
  int64_t positions;  // output positions covered: whole tiles of kLanes
  int64_t plane;      // floats per padded input plane, with room for the last tile's taps

  Flat(int64_t h_, int64_t wd_) : h(h_), wd(wd_), s(wd_ + 2) {
    positions = (h * s + kLanes - 1) / kLanes * kLanes;
    plane = std::max((h + 2) * s, positions + 2 * s + 2);
  }
};

// The weights as wp[block][c][tap][16]: each tap's 16 output channels in one vector (zero past
// k), so a tile loads one vector per tap.
std::vector<float> pack_weights(const float* w, int64_t c, int64_t k) {
  const int64_t blocks = (k + kLanes - 1) / kLanes;
  std::vector<float> wp(blocks * c * 9 * kLanes, 0.0f);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t t = 0; t < 9; ++t) {
        wp[(((kk / kLanes) * c + ci) * 9 + t) * kLanes + kk % kLanes] = w[(kk * c + ci) * 9 + t];
      }
    }
  }
  return wp;
}

// One tile: flat positions [p, p + 16) of the channel block whose packed weights start at wb
// (bias vector b), written to flat_out[l][p + ...] for the block's channels l.
TS_SIMD_INLINE void forward_tile(const float* xp, const float* wb, Vec b, int64_t c, int64_t p,
                                 const Flat& f, float* flat_out) {
  Vec acc[kLanes];
#pragma GCC unroll 16
  for (int u = 0; u < kLanes; ++u) acc[u] = b;
  for (int64_t ci = 0; ci < c; ++ci) {
    const float* plane = xp + ci * f.plane + p;
    const float* wc = wb + ci * 9 * kLanes;
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
      const float* row = plane + i * f.s;
      const Vec w0 = simd::load(wc + (i * 3) * kLanes);
      const Vec w1 = simd::load(wc + (i * 3 + 1) * kLanes);
      const Vec w2 = simd::load(wc + (i * 3 + 2) * kLanes);
      // Input column t is tap j of position t - j.
#pragma GCC unroll 18
      for (int t = 0; t < kLanes + 2; ++t) {
        const float v = row[t];
        if (t < kLanes) acc[t] += v * w0;
        if (t >= 1 && t - 1 < kLanes) acc[t - 1] += v * w1;
        if (t >= 2) acc[t - 2] += v * w2;
      }
    }
  }
  simd::transpose(acc);
#pragma GCC unroll 16
  for (int l = 0; l < kLanes; ++l) simd::store(flat_out + l * f.positions + p, acc[l]);
}

TS_ISA_CLONES void forward_images(const float* x, const float* wp, const float* bias, float* y,
                                  int64_t first, int64_t count, int64_t c, int64_t k,
                                  const Flat& f, float* xp, float* flat_out) {
  const int64_t hw = f.h * f.wd;
  for (int64_t im = first; im < first + count; ++im) {
    pad_planes(x + im * c * hw, c, f.h, f.wd, f.plane, xp);
    for (int64_t k0 = 0; k0 < k; k0 += kLanes) {
      const int64_t lanes = std::min<int64_t>(kLanes, k - k0);
      float b[kLanes] = {};
      if (bias != nullptr) std::copy(bias + k0, bias + k0 + lanes, b);
      const float* wb = wp + k0 * c * 9;
      for (int64_t p = 0; p < f.positions; p += kLanes) {
        forward_tile(xp, wb, simd::load(b), c, p, f, flat_out);
      }
      for (int64_t l = 0; l < lanes; ++l) {
        for (int64_t r = 0; r < f.h; ++r) {
          simd::copy_row(y + ((im * k + k0 + l) * f.h + r) * f.wd,
                         flat_out + l * f.positions + r * f.s, f.wd);
        }
      }
    }
  }
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
  const Flat f(h, wd);
  const std::vector<float> wp = pack_weights(w, c, k);
  parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> xp(c * f.plane), flat_out(kLanes * f.positions);
    forward_images(x, wp.data(), bias, y, i0, i1 - i0, c, k, f, xp.data(), flat_out.data());
  });
}

}  // namespace cpu
}  // namespace tessera
