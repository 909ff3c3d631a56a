// The weight gradient of the direct 3x3 convolution (see direct_conv3x3.h).
//
// dw[k, c, i, j] = sum over images n and output positions (y, x) of
//                  dy[n, k, y, x] * xpad[n, c, S y + i, S x + j]   (stride S = 1 or 2).
// The vector lanes are L output channels (16 with AVX-512, 8 with AVX2): each position
// contributes one gradient vector (the L channels' dy there) times one input scalar per tap, so
// the sums for 2 input channels x 9 taps (18 vectors; 1 x 9 with AVX2) stay in registers for a
// whole block of images, with no sums across lanes and no lanes wasted at the edges of small
// maps. To make those vectors, each image's dy is transposed, L x L at a time, into
// channel-blocked rows dyt[block][y * wo + x][L].
//
// Per step of 4 positions in a row the kernel loads 4 gradient vectors and, for each input
// channel and kernel row, the 6 input scalars (9 at stride 2) the 4 positions' 3 taps touch,
// and does 72 FMAs: about half a load per FMA, so the FMA units set the pace, not the cache.
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "tensor/cpu/block_sums.h"
#include "tensor/cpu/direct_conv3x3.h"
#include "tensor/cpu/padded_planes.h"
#include "tensor/cpu/simd_vec.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

// Images per block (block_sums.h: the result never depends on the thread count).
constexpr int64_t kImagesPerBlock = 8;

// Input channels per pass: 2 x 9 sums of 16 floats fit AVX-512's 32 registers; AVX2's 16
// registers of 8 floats hold 1 x 9 (with the 4 gradient vectors of a step).
template <int L>
constexpr int kChannelsPerPass = L == 16 ? 2 : 1;

struct Shape {
  int64_t c, k, h, wd;  // channels in and out; input rows and width
  int64_t s, plane, hw;  // padded input row stride and plane; input values per channel
  int64_t ho, wo, out_hw, channel_blocks;
  Shape(int64_t c_, int64_t k_, int64_t h_, int64_t wd_, int stride, int lanes)
      : c(c_), k(k_), h(h_), wd(wd_), s(wd_ + 2), plane((h_ + 2) * (wd_ + 2)), hw(h_ * wd_),
        ho((h_ - 1) / stride + 1), wo((wd_ - 1) / stride + 1), out_hw(ho * wo),
        channel_blocks((k_ + lanes - 1) / lanes) {}
};

// dy of one image (k x out_hw) into dyt[block][q][L] (q = y * wo + x); lanes past k are zero.
template <int L>
TS_SIMD_INLINE void block_gradient(const float* dy, const Shape& f, float* dyt) {
  using V = simd::VecT<L>;
  for (int64_t b = 0; b < f.channel_blocks; ++b) {
    for (int64_t q0 = 0; q0 < f.out_hw; q0 += L) {
      const int64_t n = std::min<int64_t>(L, f.out_hw - q0);
      V rows[L];
#pragma GCC unroll 16
      for (int l = 0; l < L; ++l) {
        const int64_t kk = b * L + l;
        rows[l] = kk < f.k ? simd::load_first<L>(dy + kk * f.out_hw + q0, n) : V{};
      }
      simd::transpose(rows);
      for (int64_t t = 0; t < n; ++t) simd::store<L>(dyt + (b * f.out_hw + q0 + t) * L, rows[t]);
    }
  }
}

// U consecutive positions of one output row: g holds their gradient vectors, x points at the
// first one's tap (0, 0) in the first of CI padded input planes; positions are S columns apart.
template <int L, int CI, int U, int S>
TS_SIMD_INLINE void accumulate(simd::VecT<L> (&acc)[CI][9], const float* g, const float* x,
                               const Shape& f) {
  simd::VecT<L> gv[U];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) gv[u] = simd::load<L>(g + u * L);
#pragma GCC unroll 2
  for (int cc = 0; cc < CI; ++cc) {
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
      const float* row = x + cc * f.plane + i * f.s;
      for_each_tap<S, U, 3>(row,
                            [&](float v, int u, int j) { acc[cc][i * 3 + j] += v * gv[u]; });
    }
  }
}

// Adds channel block b's gradient against input channels [ci0, ci0 + CI) over `count` images
// into dw (k x c x 9), for stride S.
template <int L, int CI, int S>
TS_SIMD_INLINE void channel_pass(const float* xp, const float* dyt, int64_t count, int64_t b,
                                 int64_t ci0, const Shape& f, float* dw) {
  simd::VecT<L> acc[CI][9];
#pragma GCC unroll 2
  for (int cc = 0; cc < CI; ++cc) {
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t) acc[cc][t] = simd::VecT<L>{};
  }
  for (int64_t im = 0; im < count; ++im) {
    const float* g = dyt + (im * f.channel_blocks + b) * f.out_hw * L;
    const float* x = xp + (im * f.c + ci0) * f.plane;
    for (int64_t y = 0; y < f.ho; ++y) {
      const float* gr = g + y * f.wo * L;
      const float* xr = x + S * y * f.s;
      int64_t col = 0;
      for (; col + 4 <= f.wo; col += 4) {
        accumulate<L, CI, 4, S>(acc, gr + col * L, xr + S * col, f);
      }
      if (col + 2 <= f.wo) {
        accumulate<L, CI, 2, S>(acc, gr + col * L, xr + S * col, f);
        col += 2;
      }
      if (col < f.wo) accumulate<L, CI, 1, S>(acc, gr + col * L, xr + S * col, f);
    }
  }
  float lanes[L];
  for (int cc = 0; cc < CI; ++cc) {
    for (int t = 0; t < 9; ++t) {
      simd::store<L>(lanes, acc[cc][t]);
      for (int l = 0; l < L && b * L + l < f.k; ++l) {
        dw[((b * L + l) * f.c + ci0 + cc) * 9 + t] += lanes[l];
      }
    }
  }
}

// Output channel blocks [b0, b1): each writes only its own rows of dw.
template <int L, int S>
TS_SIMD_INLINE void channel_passes(const float* xp, const float* dyt, int64_t count,
                                   const Shape& f, int64_t b0, int64_t b1, float* dw) {
  constexpr int kCI = kChannelsPerPass<L>;
  for (int64_t b = b0; b < b1; ++b) {
    int64_t ci0 = 0;
    for (; ci0 + kCI <= f.c; ci0 += kCI) channel_pass<L, kCI, S>(xp, dyt, count, b, ci0, f, dw);
    if (ci0 < f.c) channel_pass<L, 1, S>(xp, dyt, count, b, ci0, f, dw);
  }
}

// The two halves of one block of images: prepare pads images [i0, i1)'s inputs and blocks
// their gradients; passes adds the block's weight gradient for output channel blocks [b0, b1)
// into dw (zeroed by the caller).
// f16/bf16 inputs are widened as they are padded, and each image's gradient into one image's
// f32 buffer before it is blocked.
template <int L, typename T>
TS_SIMD_INLINE void prepare_images(const T* dy, const T* x, int64_t i0, int64_t i1,
                                   const Shape& f, float* xp, float* dyt) {
  std::vector<float> wide(std::is_same_v<T, float> ? 0 : f.k * f.out_hw);
  for (int64_t im = i0; im < i1; ++im) {
    pad_planes(x + im * f.c * f.hw, f.c, f.h, f.wd, f.plane, xp + im * f.c * f.plane);
    const T* g = dy + im * f.k * f.out_hw;
    const float* g32;
    if constexpr (std::is_same_v<T, float>) {
      g32 = g;
    } else {
      widen(g, wide.data(), f.k * f.out_hw);
      g32 = wide.data();
    }
    block_gradient<L>(g32, f, dyt + im * f.channel_blocks * f.out_hw * L);
  }
}

template <int L>
TS_SIMD_INLINE void passes(const float* xp, const float* dyt, int64_t count, const Shape& f,
                           int stride, int64_t b0, int64_t b1, float* dw) {
  if (stride == 1) return channel_passes<L, 1>(xp, dyt, count, f, b0, b1, dw);
  channel_passes<L, 2>(xp, dyt, count, f, b0, b1, dw);
}

template <typename T>
TS_AVX512 void prepare_avx512(const T* dy, const T* x, int64_t i0, int64_t i1, const Shape& f,
                              float* xp, float* dyt) {
  prepare_images<16>(dy, x, i0, i1, f, xp, dyt);
}
template <typename T>
TS_AVX2 void prepare_avx2(const T* dy, const T* x, int64_t i0, int64_t i1, const Shape& f,
                          float* xp, float* dyt) {
  prepare_images<8>(dy, x, i0, i1, f, xp, dyt);
}
TS_AVX512 void passes_avx512(const float* xp, const float* dyt, int64_t count, const Shape& f,
                             int stride, int64_t b0, int64_t b1, float* dw) {
  passes<16>(xp, dyt, count, f, stride, b0, b1, dw);
}
TS_AVX2 void passes_avx2(const float* xp, const float* dyt, int64_t count, const Shape& f,
                         int stride, int64_t b0, int64_t b1, float* dw) {
  passes<8>(xp, dyt, count, f, stride, b0, b1, dw);
}

// One block of images, on the calling thread or, when `split` is set, with its images
// (prepare) and then its output channel blocks (passes) spread over tessera's threads. Either
// way every sum is added in the same order, so the result is the same bits.
template <typename T>
void weight_block(const T* dy, const T* x, float* dw, int64_t count, const Shape& f, int stride,
                  bool split, float* xp, float* dyt) {
  const bool wide = direct_conv3x3_lanes() == 16;
  auto prepare = [&](int64_t i0, int64_t i1) {
    wide ? prepare_avx512(dy, x, i0, i1, f, xp, dyt) : prepare_avx2(dy, x, i0, i1, f, xp, dyt);
  };
  auto pass = [&](int64_t b0, int64_t b1) {
    wide ? passes_avx512(xp, dyt, count, f, stride, b0, b1, dw)
         : passes_avx2(xp, dyt, count, f, stride, b0, b1, dw);
  };
  if (!split) {
    prepare(0, count);
    return pass(0, f.channel_blocks);
  }
  parallel_for(count, 1, prepare);
  parallel_for(f.channel_blocks, 1, pass);
}

}  // namespace

template <typename T>
void direct_conv3x3_backward_weight(const T* dy, const T* x, float* dw, int64_t n, int64_t c,
                                    int64_t k, int64_t h, int64_t wd, int stride) {
  const int lanes = direct_conv3x3_lanes();
  const Shape f(c, k, h, wd, stride, lanes);
  const int64_t weight_size = k * c * 9;
  const int64_t blocks = (n + kImagesPerBlock - 1) / kImagesPerBlock;
  // Fewer blocks than threads (a batch of 8 at two threads): the blocks run one after another,
  // each spread over the threads by output channels; otherwise each block runs on one thread.
  const bool split = blocks < num_threads();
  auto block_range = [&](int64_t b0, int64_t b1, float* partial) {
    // Not zeroed: prepare writes every value it passes read (pad_planes clears the borders
    // itself, block_gradient fills a last partial channel block with zeros), and clearing both
    // whole buffers cost 0.7% of a ResNet-18 step, on one thread even at two.
    const int64_t xp_size = kImagesPerBlock * c * f.plane;
    const int64_t dyt_size = kImagesPerBlock * f.channel_blocks * f.out_hw * lanes;
    const std::unique_ptr<float[]> xp(new float[xp_size]), dyt(new float[dyt_size]);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t first = b * kImagesPerBlock, count = std::min(kImagesPerBlock, n - first);
      weight_block(dy + first * k * f.out_hw, x + first * c * f.hw, partial + b * weight_size,
                   count, f, stride, split, xp.get(), dyt.get());
    }
  };
  if (!split) return sum_over_blocks<float>(blocks, weight_size, block_range, dw);
  // The same partial sums as sum_over_blocks, with the blocks in a serial loop.
  std::vector<float> partial(blocks * weight_size, 0.0f);
  block_range(0, blocks, partial.data());
  std::copy(partial.begin(), partial.begin() + weight_size, dw);
  for (int64_t b = 1; b < blocks; ++b) {
    const float* p = partial.data() + b * weight_size;
    for (int64_t i = 0; i < weight_size; ++i) dw[i] += p[i];
  }
}

template void direct_conv3x3_backward_weight(const float*, const float*, float*, int64_t,
                                             int64_t, int64_t, int64_t, int64_t, int);
template void direct_conv3x3_backward_weight(const Half*, const Half*, float*, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int);
template void direct_conv3x3_backward_weight(const BFloat16*, const BFloat16*, float*, int64_t,
                                             int64_t, int64_t, int64_t, int64_t, int);

}  // namespace cpu
}  // namespace tessera
