// f16 <-> f32 by the conversion instructions (f16_block.h says why and how they round): AVX-512
// converts 16 values an instruction, F16C (every AVX2 machine has it) 8; the tail of a run and
// machines with neither take the portable loops.
#include <immintrin.h>

#include <cstring>

#include "tensor/cpu/f16_block.h"
#include "tensor/cpu/simd_vec.h"

namespace tessera {
namespace cpu {

namespace {

// n values, any n: whole vectors, then the last r < 16 through a zero-padded 16-value buffer
// with a masked store (so rows of 7 or 14, as the convolutions convert, stay on the vector
// instructions too).
TS_AVX512 void widen_avx512(const uint16_t* in, float* out, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + j));
    _mm512_storeu_ps(out + j, _mm512_cvtph_ps(h));
  }
  if (j == n) return;
  alignas(32) uint16_t tail[16] = {};
  std::memcpy(tail, in + j, (n - j) * sizeof(uint16_t));
  const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1);
  _mm512_mask_storeu_ps(out + j, m,
                        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(tail))));
}

TS_AVX512 void narrow_avx512(const float* in, uint16_t* out, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + j), kRound);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), h);
  }
  if (j == n) return;
  const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1);
  alignas(32) uint16_t tail[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(tail),
                     _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, in + j), kRound));
  std::memcpy(out + j, tail, (n - j) * sizeof(uint16_t));
}

__attribute__((target("avx2,f16c"))) void widen_f16c(const uint16_t* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; j += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j));
    _mm256_storeu_ps(out + j, _mm256_cvtph_ps(h));
  }
}

__attribute__((target("avx2,f16c"))) void narrow_f16c(const float* in, uint16_t* out,
                                                        int64_t n) {
  for (int64_t j = 0; j < n; j += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), h);
  }
}

// Lanes per instruction on this machine: 16, 8, or 0 (the portable loops only).
int conversion_lanes() {
  switch (simd::level()) {
    case simd::Level::kAvx512: return 16;
    case simd::Level::kAvx2: return 8;
    default: return 0;
  }
}

}  // namespace

void widen_f16(const Half* in, float* out, int64_t n) {
  static const int lanes = conversion_lanes();
  const int64_t body = lanes == 0 ? 0 : lanes == 16 ? n : n / lanes * lanes;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
  if (lanes == 16) widen_avx512(h, out, body);
  if (lanes == 8) widen_f16c(h, out, body);
  widen_f16_portable(in + body, out + body, n - body);
}

void narrow_to_f16(const float* in, Half* out, int64_t n) {
  static const int lanes = conversion_lanes();
  const int64_t body = lanes == 0 ? 0 : lanes == 16 ? n : n / lanes * lanes;
  uint16_t* h = reinterpret_cast<uint16_t*>(out);
  if (lanes == 16) narrow_avx512(in, h, body);
  if (lanes == 8) narrow_f16c(in, h, body);
  narrow_to_f16_portable(in + body, out + body, n - body);
}

}  // namespace cpu
}  // namespace tessera
