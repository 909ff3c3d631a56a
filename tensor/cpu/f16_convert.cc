// f16 <-> f32 by the conversion instructions (f16_block.h says why and how they round): AVX-512
// converts 16 values an instruction, F16C (every AVX2 machine has it) 8; the tail of a run and
// machines with neither take the portable loops.
#include <immintrin.h>

#include "tensor/cpu/f16_block.h"
#include "tensor/cpu/simd_vec.h"

namespace tessera {
namespace cpu {

namespace {

TS_AVX512 void widen_avx512(const uint16_t* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + j));
    _mm512_storeu_ps(out + j, _mm512_cvtph_ps(h));
  }
}

TS_AVX512 void narrow_avx512(const float* in, uint16_t* out, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __m256i h =
        _mm512_cvtps_ph(_mm512_loadu_ps(in + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), h);
  }
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
  const int64_t body = lanes == 0 ? 0 : n / lanes * lanes;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
  if (lanes == 16) widen_avx512(h, out, body);
  if (lanes == 8) widen_f16c(h, out, body);
  widen_f16_portable(in + body, out + body, n - body);
}

void narrow_to_f16(const float* in, Half* out, int64_t n) {
  static const int lanes = conversion_lanes();
  const int64_t body = lanes == 0 ? 0 : n / lanes * lanes;
  uint16_t* h = reinterpret_cast<uint16_t*>(out);
  if (lanes == 16) narrow_avx512(in, h, body);
  if (lanes == 8) narrow_f16c(in, h, body);
  narrow_to_f16_portable(in + body, out + body, n - body);
}

}  // namespace cpu
}  // namespace tessera
