#include "tensor/cpu/direct_conv3x3.h"

#include <algorithm>
#include <vector>

#include "tensor/cpu/padded_planes.h"
#include "tensor/cpu/simd_vec.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// The forward kernel (and, with flipped weights, the input gradient; the weight gradient is in
// direct_conv3x3_weight.cc) reads *flattened padded planes* (padded_planes.h). At stride 1,
// output (y, x) sits at flat position q = y s + x (s = w + 2, the padded row stride) and its
// tap (i, j) at input position q + i s + j, so a tile of consecutive positions reads
// consecutive inputs for every tap. At stride 2 the padded rows are stored even rows first,
// then odd ones, and q = y s/2 + x: tap (i, j) of q is input 2q + j in the plane of kernel row
// i's parity (row i = 2 starts one stored row later). The positions of each row past the
// output width (2 at stride 1, 1 at stride 2) are junk, dropped when the result is copied out.
//
// The vector lanes are L output channels (L = 16 with AVX-512, 8 with AVX2). A tile is L
// consecutive flat positions of one block of L output channels: L sums (one vector per
// position) stay in registers while, for each input channel and kernel row, the 3 taps' weight
// vectors are loaded once and each input scalar the row touches is broadcast into every sum it
// feeds (at stride 1 and L = 16, 18 scalars for 48 FMAs). The finished tile is transposed
// L x L into one vector of positions per channel.

// The flattened geometry of one image's planes, for tiles of `lanes` positions.
struct Flat {
  int stride;
  int64_t h, wd;      // input rows and width
  int64_t ho, wo;     // output rows and width
  int64_t s;          // padded input row stride (even at stride 2)
  int64_t so;         // flat output row stride: s at stride 1, s / 2 at stride 2
  int64_t positions;  // flat output positions covered: whole tiles
  int64_t row[3];     // where kernel row i's inputs start, from a channel's plane
  int64_t plane;      // floats per channel, with room for the last tile's taps

  Flat(int64_t h_, int64_t wd_, int stride_, int lanes)
      : stride(stride_), h(h_), wd(wd_), ho((h_ - 1) / stride_ + 1), wo((wd_ - 1) / stride_ + 1) {
    s = stride == 1 ? wd + 2 : (wd + 3) / 2 * 2;
    so = s / stride;
    positions = (ho * so + lanes - 1) / lanes * lanes;
    const int64_t last_read = stride * positions + 2;  // past a tile's last tap, from row i
    if (stride == 1) {
      row[0] = 0, row[1] = s, row[2] = 2 * s;
      plane = std::max((h + 2) * s, 2 * s + last_read);
    } else {
      const int64_t even_rows = (h + 3) / 2;  // padded rows 0, 2, ..., of h + 2
      row[0] = 0, row[1] = even_rows * s, row[2] = s;
      plane = row[1] + std::max((h + 2 - even_rows) * s, last_read);
    }
  }
};

// The weights as wp[block][c][tap][L]: each tap's L output channels in one vector (zero past
// k), so a tile loads one vector per tap.
std::vector<float> pack_weights(const float* w, int64_t c, int64_t k, int lanes) {
  const int64_t blocks = (k + lanes - 1) / lanes;
  std::vector<float> wp(blocks * c * 9 * lanes, 0.0f);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t t = 0; t < 9; ++t) {
        wp[(((kk / lanes) * c + ci) * 9 + t) * lanes + kk % lanes] = w[(kk * c + ci) * 9 + t];
      }
    }
  }
  return wp;
}

// One tile: flat positions [q, q + L) of the channel block whose packed weights start at wb
// (bias vector b), written to flat_out[l][q + ...] for the block's channels l.
template <int L, int S>
TS_SIMD_INLINE void forward_tile(const float* xp, const float* wb, simd::VecT<L> b, int64_t c,
                                 int64_t q, const Flat& f, float* flat_out) {
  using V = simd::VecT<L>;
  V acc[L];
#pragma GCC unroll 16
  for (int u = 0; u < L; ++u) acc[u] = b;
  for (int64_t ci = 0; ci < c; ++ci) {
    const float* plane = xp + ci * f.plane + S * q;
    const float* wc = wb + ci * 9 * L;
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
      const float* row = plane + f.row[i];
      const V w[3] = {simd::load<L>(wc + (i * 3) * L), simd::load<L>(wc + (i * 3 + 1) * L),
                      simd::load<L>(wc + (i * 3 + 2) * L)};
      for_each_tap<S, L, 3>(row, [&](float v, int u, int j) { acc[u] += v * w[j]; });
    }
  }
  simd::transpose(acc);
#pragma GCC unroll 16
  for (int l = 0; l < L; ++l) simd::store<L>(flat_out + l * f.positions + q, acc[l]);
}

template <int L, typename T>
TS_SIMD_INLINE void forward_images(const T* x, const float* wp, const float* bias, T* y,
                                   int64_t first, int64_t count, int64_t c, int64_t k,
                                   const Flat& f, float* xp, float* flat_out) {
  const int64_t hw = f.h * f.wd, out_hw = f.ho * f.wo;
  for (int64_t im = first; im < first + count; ++im) {
    if (f.stride == 1) {
      pad_planes(x + im * c * hw, c, f.h, f.wd, f.plane, xp);
    } else {
      pad_planes_by_row_parity(x + im * c * hw, c, f.h, f.wd, f.s, f.plane, xp);
    }
    for (int64_t k0 = 0; k0 < k; k0 += L) {
      const int64_t lanes = std::min<int64_t>(L, k - k0);
      float b[L] = {};
      if (bias != nullptr) std::copy(bias + k0, bias + k0 + lanes, b);
      const float* wb = wp + k0 * c * 9;
      for (int64_t q = 0; q < f.positions; q += L) {
        if (f.stride == 1) {
          forward_tile<L, 1>(xp, wb, simd::load<L>(b), c, q, f, flat_out);
        } else {
          forward_tile<L, 2>(xp, wb, simd::load<L>(b), c, q, f, flat_out);
        }
      }
      for (int64_t l = 0; l < lanes; ++l) {
        for (int64_t r = 0; r < f.ho; ++r) {
          store_row(y + (im * k + k0 + l) * out_hw + r * f.wo,
                    flat_out + l * f.positions + r * f.so, f.wo);
        }
      }
    }
  }
}

// The two instruction sets' entry points (each inlines the templates above for its target).
template <typename T>
TS_AVX512 void forward_images_avx512(const T* x, const float* wp, const float* bias, T* y,
                                     int64_t first, int64_t count, int64_t c, int64_t k,
                                     const Flat& f, float* xp, float* flat_out) {
  forward_images<16>(x, wp, bias, y, first, count, c, k, f, xp, flat_out);
}

template <typename T>
TS_AVX2 void forward_images_avx2(const T* x, const float* wp, const float* bias, T* y,
                                 int64_t first, int64_t count, int64_t c, int64_t k,
                                 const Flat& f, float* xp, float* flat_out) {
  forward_images<8>(x, wp, bias, y, first, count, c, k, f, xp, flat_out);
}

}  // namespace

int direct_conv3x3_lanes() {
  switch (simd::level()) {
    case simd::Level::kAvx512: return 16;
    case simd::Level::kAvx2: return 8;
    default: return 0;
  }
}

bool direct_conv3x3_applies(int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                            int64_t dilation_w, int64_t groups) {
  return direct_conv3x3_lanes() > 0 && out_channels % 8 == 0 && kh == 3 && kw == 3 &&
         stride_h == stride_w && (stride_h == 1 || stride_h == 2) && pad_h == 1 && pad_w == 1 &&
         dilation_h == 1 && dilation_w == 1 && groups == 1;
}

template <typename T>
void direct_conv3x3(const T* x, const float* w, const float* bias, T* y, int64_t n, int64_t c,
                    int64_t k, int64_t h, int64_t wd, int stride) {
  const int lanes = direct_conv3x3_lanes();
  const Flat f(h, wd, stride, lanes);
  const std::vector<float> wp = pack_weights(w, c, k, lanes);
  parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> xp(c * f.plane), flat_out(lanes * f.positions);
    if (lanes == 16) {
      forward_images_avx512(x, wp.data(), bias, y, i0, i1 - i0, c, k, f, xp.data(),
                            flat_out.data());
    } else {
      forward_images_avx2(x, wp.data(), bias, y, i0, i1 - i0, c, k, f, xp.data(),
                          flat_out.data());
    }
  });
}

template void direct_conv3x3(const float*, const float*, const float*, float*, int64_t, int64_t,
                             int64_t, int64_t, int64_t, int);
template void direct_conv3x3(const Half*, const float*, const float*, Half*, int64_t, int64_t,
                             int64_t, int64_t, int64_t, int);
template void direct_conv3x3(const BFloat16*, const float*, const float*, BFloat16*, int64_t,
                             int64_t, int64_t, int64_t, int64_t, int);

}  // namespace cpu
}  // namespace tessera
