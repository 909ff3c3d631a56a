#include "tensor/cpu/channel_blocks.h"

#include <algorithm>
#include <vector>

#include "tensor/cpu/bf16_block.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kBlock = 16;  // channels per block (the 16c of nChw16c)
constexpr int64_t kPiece = 64;  // positions widened or narrowed at a time: 16 rows, 4 KiB

// Each task is blocks [b0, b1) of 16 * s elements; about 64K elements per task at least.
template <typename F>
void for_each_block(int64_t n, int64_t c, int64_t s, F f) {
  const int64_t blocks = n * (c / kBlock);
  const int64_t grain = std::max<int64_t>(1, 65536 / (kBlock * s));
  parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b * kBlock * s);
  });
}

}  // namespace

template <typename T>
void to_channel_blocks(const T* x, float* blocked, int64_t n, int64_t c, int64_t s) {
  for_each_block(n, c, s, [&](int64_t offset) {
    const T* rows = x + offset;  // 16 rows of s
    float* out = blocked + offset;
    float piece[kBlock][kPiece];
    for (int64_t j0 = 0; j0 < s; j0 += kPiece) {
      const int64_t m = std::min(kPiece, s - j0);
      for (int64_t l = 0; l < kBlock; ++l) widen(rows + l * s + j0, piece[l], m);
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t l = 0; l < kBlock; ++l) out[(j0 + j) * kBlock + l] = piece[l][j];
      }
    }
  });
}

template <typename T>
void from_channel_blocks(const float* blocked, T* x, int64_t n, int64_t c, int64_t s) {
  for_each_block(n, c, s, [&](int64_t offset) {
    const float* in = blocked + offset;
    T* rows = x + offset;
    float piece[kBlock][kPiece];
    for (int64_t j0 = 0; j0 < s; j0 += kPiece) {
      const int64_t m = std::min(kPiece, s - j0);
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t l = 0; l < kBlock; ++l) piece[l][j] = in[(j0 + j) * kBlock + l];
      }
      for (int64_t l = 0; l < kBlock; ++l) narrow(piece[l], rows + l * s + j0, m);
    }
  });
}

namespace {

// Weights into tiles (kToBlocks) or back: each task takes tile-rows (ob, ib), 16 output channels'
// runs of 16 * kh * kw contiguous values, widened into `row` ([16][16 * kh * kw]) and scattered
// into the tiles, or gathered from them into `row` and narrowed.
template <bool kToBlocks, typename T, typename B>
void weight_tiles(T* w, B* blocked, const WeightBlocks& b) {
  const int64_t taps = b.kh * b.kw, width = kBlock * taps;
  const int64_t ib_count = b.i / kBlock;
  // Each tile in its own order: (outer, inner) is (i, o) for 16i16o, else (o, i).
  const int64_t outer_step = b.o_innermost ? taps : width;
  const int64_t inner_step = b.o_innermost ? width : taps;
  parallel_for((b.o / kBlock) * ib_count, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> row(kBlock * width);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ob = t / ib_count, ib = t % ib_count;
      // Output channel ob*16 + o's 16 input channels from ib*16 on: width contiguous values.
      T* src = w + ((ob * kBlock) * b.i + ib * kBlock) * taps;
      if constexpr (kToBlocks) {
        for (int64_t o = 0; o < kBlock; ++o) widen(src + o * b.i * taps, &row[o * width], width);
      }
      for (int64_t tap = 0; tap < taps; ++tap) {
        B* tile = blocked + ob * b.stride[0] + ib * b.stride[1] + (tap / b.kw) * b.stride[2] +
                  (tap % b.kw) * b.stride[3];
        for (int64_t u = 0; u < kBlock; ++u) {
          B* t = tile + u * kBlock;
          float* r = &row[u * outer_step + tap];
          for (int64_t v = 0; v < kBlock; ++v) {
            if constexpr (kToBlocks) {
              t[v] = r[v * inner_step];
            } else {
              r[v * inner_step] = t[v];
            }
          }
        }
      }
      if constexpr (!kToBlocks) {
        for (int64_t o = 0; o < kBlock; ++o) narrow(&row[o * width], src + o * b.i * taps, width);
      }
    }
  });
}

}  // namespace

template <typename T>
void to_weight_blocks(const T* w, float* blocked, const WeightBlocks& b) {
  weight_tiles<true>(w, blocked, b);
}
template <typename T>
void from_weight_blocks(const float* blocked, T* w, const WeightBlocks& b) {
  weight_tiles<false>(w, blocked, b);
}

template void to_channel_blocks(const Half*, float*, int64_t, int64_t, int64_t);
template void to_channel_blocks(const BFloat16*, float*, int64_t, int64_t, int64_t);
template void from_channel_blocks(const float*, Half*, int64_t, int64_t, int64_t);
template void from_channel_blocks(const float*, BFloat16*, int64_t, int64_t, int64_t);
template void to_weight_blocks(const Half*, float*, const WeightBlocks&);
template void to_weight_blocks(const BFloat16*, float*, const WeightBlocks&);
template void from_weight_blocks(const float*, float*, const WeightBlocks&);
template void from_weight_blocks(const float*, Half*, const WeightBlocks&);
template void from_weight_blocks(const float*, BFloat16*, const WeightBlocks&);

}  // namespace cpu
}  // namespace tessera
