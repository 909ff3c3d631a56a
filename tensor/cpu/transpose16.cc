#include "tensor/cpu/transpose16.h"

#include <immintrin.h>

#include <algorithm>

#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kTileRows = 32, kTileCols = 16;

#define TS_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

// In place: r[j]'s 32-bit lane k becomes the old r[k]'s lane j (a 16 x 16 transpose). Stage one
// interleaves lanes of row pairs, stage two 64-bit pairs, so s[4b + m]'s 128-bit block L holds
// rows 4b..4b+3 of column 4L + m; two rounds of 128-bit block shuffles gather column c's four
// blocks.
TS_AVX512BW void transpose_16x16_epi32(__m512i* r) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  __m512i s[16];
  for (int i = 0; i < 16; i += 4) {
    s[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    s[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    s[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    s[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    // 0x88 takes blocks 0 and 2 of each source, 0xDD blocks 1 and 3.
    const __m512i a = _mm512_shuffle_i32x4(s[m], s[4 + m], 0x88);
    const __m512i b = _mm512_shuffle_i32x4(s[m], s[4 + m], 0xDD);
    const __m512i c = _mm512_shuffle_i32x4(s[8 + m], s[12 + m], 0x88);
    const __m512i d = _mm512_shuffle_i32x4(s[8 + m], s[12 + m], 0xDD);
    r[m] = _mm512_shuffle_i32x4(a, c, 0x88);
    r[8 + m] = _mm512_shuffle_i32x4(a, c, 0xDD);
    r[4 + m] = _mm512_shuffle_i32x4(b, d, 0x88);
    r[12 + m] = _mm512_shuffle_i32x4(b, d, 0xDD);
  }
}

// Row i's columns under the mask, or zeros past the last row m - 1.
TS_AVX512BW __m256i load_row(const uint16_t* src, int64_t src_ld, int64_t i, int64_t m,
                             __mmask16 columns) {
  return i < m ? _mm256_maskz_loadu_epi16(columns, src + i * src_ld) : _mm256_setzero_si256();
}

// src rows [0, m) x columns [0, q) -> dst rows [0, q) x columns [0, m), m <= 32, q <= 16: a
// whole tile, or an edge one through masked loads (missing rows read as zeros) and masked stores.
TS_AVX512BW void tile_avx512(const uint16_t* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld,
                             int64_t m, int64_t q) {
  // Lane e of the result takes value pair[e] of [row a | row b]: a[0], b[0], a[1], b[1], ...
  alignas(64) static const uint16_t kPair[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                 21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i pair = _mm512_load_si512(kPair);
  const __mmask16 columns = static_cast<__mmask16>((1u << q) - 1);
  __m512i r[16];
  for (int k = 0; k < 16; ++k) {
    const __m256i a = load_row(src, src_ld, 2 * k, m, columns);
    const __m256i b = load_row(src, src_ld, 2 * k + 1, m, columns);
    r[k] = _mm512_permutexvar_epi16(pair, _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
  }
  transpose_16x16_epi32(r);
  const __mmask32 rows = m == kTileRows ? ~__mmask32{0} : static_cast<__mmask32>((1u << m) - 1);
  for (int64_t j = 0; j < q; ++j) _mm512_mask_storeu_epi16(dst + j * dst_ld, rows, r[j]);
}

void tile_scalar(const uint16_t* src, int64_t src_ld, uint16_t* dst, int64_t dst_ld,
                 int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < rows; ++i) dst[j * dst_ld + i] = src[i * src_ld + j];
  }
}

bool has_avx512bw() {
  static const bool yes = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return yes;
}

// Each of n matrices [rows][cols] (contiguous, one after another) into [cols][rows]; a task is
// one matrix's block of 32 rows, all its columns.
void transpose(const uint16_t* src, uint16_t* dst, int64_t n, int64_t rows, int64_t cols) {
  const int64_t blocks = (rows + kTileRows - 1) / kTileRows;
  const bool vector = has_avx512bw();
  parallel_for(n * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t image = t / blocks, r0 = (t % blocks) * kTileRows;
      const int64_t m = std::min(kTileRows, rows - r0);
      const uint16_t* s = src + image * rows * cols + r0 * cols;
      uint16_t* d = dst + image * rows * cols + r0;
      if (!vector) {
        tile_scalar(s, cols, d, rows, m, cols);
        continue;
      }
      for (int64_t c0 = 0; c0 < cols; c0 += kTileCols) {
        tile_avx512(s + c0, cols, d + c0 * rows, rows, m, std::min(kTileCols, cols - c0));
      }
    }
  });
}

}  // namespace

void nchw_to_nhwc_16bit(const uint16_t* x, uint16_t* y, int64_t n, int64_t c, int64_t s) {
  transpose(x, y, n, c, s);
}

void nhwc_to_nchw_16bit(const uint16_t* y, uint16_t* x, int64_t n, int64_t c, int64_t s) {
  transpose(y, x, n, s, c);
}

}  // namespace cpu
}  // namespace tessera
