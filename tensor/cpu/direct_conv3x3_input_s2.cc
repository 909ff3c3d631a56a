// The input gradient of the direct 3x3 convolution at stride 2 (see direct_conv3x3.h): a
// transposed convolution, computed one output parity at a time.
//
// Forward, y[k, a, b] = sum w[k, c, i, j] * xpad[c, 2a + i, 2b + j], so input row r (padded
// row r + 1) receives from output row a through kernel row i only when 2a + i = r + 1. An even
// row r = 2a' takes kernel row 1 of output row a'; an odd row r = 2a' + 1 takes kernel row 2 of
// output row a' and kernel row 0 of output row a' + 1. Columns likewise. So each of the four
// parity classes of dx (even/odd row x even/odd column) is a stride-1 correlation of dy with 1,
// 2 or 4 of the 9 taps, at offsets 0 or +1 (1 + 2 + 2 + 4 = 9), and dy needs only one zero row
// and column after its end. Each class runs the forward kernel's tiles (direct_conv3x3.cc): 16
// input-gradient channels in the vector lanes, 16 flat positions of the class's grid (row
// stride wo + 1) in registers, then a 16 x 16 transpose (8 and 8 x 8 with AVX2); the result
// lands on every other element of dx's rows.
#include <algorithm>
#include <vector>

#include "tensor/cpu/direct_conv3x3.h"
#include "tensor/cpu/padded_planes.h"
#include "tensor/cpu/simd_vec.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// Kernel row (or column) and dy offset of tap t of a class of parity p: parity 0 has one tap
// (kernel index 1, offset 0); parity 1 two (kernel index 2 at offset 0, index 0 at offset +1).
constexpr int kernel_index(int parity, int t) { return parity == 0 ? 1 : (t == 0 ? 2 : 0); }

struct Geometry {
  int64_t h, wd, ho, wo;  // dx and dy maps
  int64_t s;              // padded dy row stride, wo + 1
  int64_t positions;      // flat positions of the largest class grid, whole tiles
  int64_t plane;          // floats per padded dy channel, with room for the last tile's taps

  Geometry(int64_t h_, int64_t wd_, int lanes)
      : h(h_), wd(wd_), ho((h_ - 1) / 2 + 1), wo((wd_ - 1) / 2 + 1), s(wo + 1) {
    positions = (ho * s + lanes - 1) / lanes * lanes;  // class rows <= ho
    plane = std::max((ho + 1) * s, positions + s + lanes + 1);
  }
  int64_t rows(int pr) const { return pr == 0 ? (h + 1) / 2 : h / 2; }
  int64_t cols(int pc) const { return pc == 0 ? (wd + 1) / 2 : wd / 2; }
};

// The weights of class (pr, pc) as wp[block][k][tap][L]: L dx channels per vector, taps in
// (row tap, column tap) order.
std::vector<float> pack_class_weights(const float* w, int64_t c, int64_t k, int pr, int pc,
                                      int lanes) {
  const int nr = pr + 1, nc = pc + 1;
  const int64_t blocks = (c + lanes - 1) / lanes;
  std::vector<float> wp(blocks * k * nr * nc * lanes, 0.0f);
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int r = 0; r < nr; ++r) {
        for (int q = 0; q < nc; ++q) {
          const int64_t tap = ((ci / lanes) * k + kk) * nr * nc + r * nc + q;
          wp[tap * lanes + ci % lanes] =
              w[((kk * c + ci) * 3 + kernel_index(pr, r)) * 3 + kernel_index(pc, q)];
        }
      }
    }
  }
  return wp;
}

// One tile of class (NR - 1, NC - 1): flat positions [q, q + L) of one block of L dx
// channels, from the k padded dy planes at dyp.
template <int L, int NR, int NC>
TS_SIMD_INLINE void class_tile(const float* dyp, const float* wb, int64_t k, int64_t q,
                               const Geometry& g, float* flat_out) {
  using V = simd::VecT<L>;
  V acc[L];
#pragma GCC unroll 16
  for (int u = 0; u < L; ++u) acc[u] = V{};
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* plane = dyp + kk * g.plane + q;
    const float* wk = wb + kk * NR * NC * L;
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r) {
      const float* row = plane + r * g.s;  // row tap r reads dy row a' + r
      V w[NC];
#pragma GCC unroll 2
      for (int c = 0; c < NC; ++c) w[c] = simd::load<L>(wk + (r * NC + c) * L);
      // Column tap c reads dy column u + c for position u.
      for_each_tap<1, L, NC>(row, [&](float v, int u, int c) { acc[u] += v * w[c]; });
    }
  }
  simd::transpose(acc);
#pragma GCC unroll 16
  for (int l = 0; l < L; ++l) simd::store<L>(flat_out + l * g.positions + q, acc[l]);
}

template <int L, int NR, int NC>
TS_SIMD_INLINE void class_image(const float* dyp, const float* wp, float* dx, int64_t c,
                                int64_t k, const Geometry& g, float* flat_out) {
  constexpr int pr = NR - 1, pc = NC - 1;
  const int64_t rows = g.rows(pr), cols = g.cols(pc);
  if (rows == 0 || cols == 0) return;
  const int64_t positions = (rows * g.s + L - 1) / L * L;
  for (int64_t c0 = 0; c0 < c; c0 += L) {
    const float* wb = wp + c0 * k * NR * NC;
    for (int64_t q = 0; q < positions; q += L) class_tile<L, NR, NC>(dyp, wb, k, q, g, flat_out);
    for (int64_t l = 0; l < std::min<int64_t>(L, c - c0); ++l) {
      float* plane = dx + (c0 + l) * g.h * g.wd;
      for (int64_t a = 0; a < rows; ++a) {
        const float* src = flat_out + l * g.positions + a * g.s;
        float* dst = plane + (2 * a + pr) * g.wd + pc;
        for (int64_t b = 0; b < cols; ++b) dst[2 * b] = src[b];
      }
    }
  }
}

template <int L>
TS_SIMD_INLINE void input_images(const float* dy, const float* const* wp, float* dx,
                                 int64_t first, int64_t count, int64_t c, int64_t k,
                                 const Geometry& g, float* dyp, float* flat_out) {
  for (int64_t im = first; im < first + count; ++im) {
    // dy's planes with a zero column after each row and a zero row (and slack) after the last.
    std::fill(dyp, dyp + k * g.plane, 0.0f);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t a = 0; a < g.ho; ++a) {
        simd::copy_row(dyp + kk * g.plane + a * g.s, dy + ((im * k + kk) * g.ho + a) * g.wo,
                       g.wo);
      }
    }
    float* dxi = dx + im * c * g.h * g.wd;
    class_image<L, 1, 1>(dyp, wp[0], dxi, c, k, g, flat_out);
    class_image<L, 1, 2>(dyp, wp[1], dxi, c, k, g, flat_out);
    class_image<L, 2, 1>(dyp, wp[2], dxi, c, k, g, flat_out);
    class_image<L, 2, 2>(dyp, wp[3], dxi, c, k, g, flat_out);
  }
}

TS_AVX512 void input_images_avx512(const float* dy, const float* const* wp, float* dx,
                                   int64_t first, int64_t count, int64_t c, int64_t k,
                                   const Geometry& g, float* dyp, float* flat_out) {
  input_images<16>(dy, wp, dx, first, count, c, k, g, dyp, flat_out);
}

TS_AVX2 void input_images_avx2(const float* dy, const float* const* wp, float* dx,
                               int64_t first, int64_t count, int64_t c, int64_t k,
                               const Geometry& g, float* dyp, float* flat_out) {
  input_images<8>(dy, wp, dx, first, count, c, k, g, dyp, flat_out);
}

}  // namespace

void direct_conv3x3_backward_input_stride2(const float* dy, const float* w, float* dx, int64_t n,
                                           int64_t c, int64_t k, int64_t h, int64_t wd) {
  const int lanes = direct_conv3x3_lanes();
  const Geometry g(h, wd, lanes);
  std::vector<float> packed[4];
  for (int pr = 0; pr < 2; ++pr) {
    for (int pc = 0; pc < 2; ++pc) {
      packed[pr * 2 + pc] = pack_class_weights(w, c, k, pr, pc, lanes);
    }
  }
  const float* wp[4] = {packed[0].data(), packed[1].data(), packed[2].data(), packed[3].data()};
  parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> dyp(k * g.plane), flat_out(lanes * g.positions);
    if (lanes == 16) {
      input_images_avx512(dy, wp, dx, i0, i1 - i0, c, k, g, dyp.data(), flat_out.data());
    } else {
      input_images_avx2(dy, wp, dx, i0, i1 - i0, c, k, g, dyp.data(), flat_out.data());
    }
  });
}

}  // namespace cpu
}  // namespace tessera
