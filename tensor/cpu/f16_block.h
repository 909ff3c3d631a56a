// f16 <-> f32 in loops the compiler vectorizes, for the kernels' f16 runs (bf16_block.h is the
// bf16 twin, and its widen/narrow overloads route f16 here).
//
// The arithmetic is Eigen::half's own software conversion (Fabian Giesen's), written without
// branches so each element takes every path and masks keep the right one (with `?:`, GCC sinks
// the float arithmetic into a branch and then cannot vectorize it, as it may trap):
//
//   widen   f16 bits << 13 and rebias the exponent by 127 - 15; infinities and NaNs rebias by
//           another 128 - 16; subnormals become normal floats by one subtraction of 2^-14.
//   narrow  rebias and round to nearest even (add 0xFFF plus the lowest kept bit, then drop 13
//           bits); results below 2^-14 round by one float addition of a magic constant that
//           puts the 10 kept bits at the bottom; 65520 and above become infinity; NaNs the
//           quiet NaN 0x7E00 (sign kept).
//
// Eigen converts one element at a time through branches GCC does not vectorize, which made
// fp16 autocast's casts, ReLUs and adds several times slower than f32 (a ResNet-20 step 3.2x
// f32's). Bit for bit Eigen's software results (tests/tensor/half_kernels_test.cc).
//
// widen_f16 and narrow_to_f16 run the CPU's own conversion instructions where it has them
// (f16_convert.cc: AVX-512's 16-lane vcvtph2ps/vcvtps2ph, or F16C's 8-lane ones on AVX2
// machines), and the portable loops below otherwise (or with TESSERA_SIMD=none). The
// instructions round the same way (to nearest even, overflow to infinity, subnormals exact);
// they differ only in a NaN's payload bits, which they keep where the loops make the quiet NaN
// 0x7E00 (as Eigen built with -march=native does). On the AMD EPYC here the instructions took
// fp16 autocast's conversions from the largest cost an fp16 step adds over f32 to a small one
// (docs/BENCHMARKS.md, issue 31).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/half.h"

namespace tessera {
namespace cpu {

inline void widen_f16_portable(const Half* in, float* out, int64_t n) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
  uint32_t* u = reinterpret_cast<uint32_t*>(out);
  constexpr uint32_t kShiftedExponent = 0x7C00u << 13;
  const float magic = __builtin_bit_cast(float, 113u << 23);  // 2^-14
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t x = h[j];
    const uint32_t bits = ((x & 0x7FFFu) << 13) + ((127u - 15u) << 23);
    const uint32_t exponent = (x << 13) & kShiftedExponent;
    const uint32_t inf_nan = bits + ((128u - 16u) << 23);
    const uint32_t subnormal =
        __builtin_bit_cast(uint32_t, __builtin_bit_cast(float, bits + (1u << 23)) - magic);
    const uint32_t is_inf_nan = 0u - static_cast<uint32_t>(exponent == kShiftedExponent);
    const uint32_t is_subnormal = 0u - static_cast<uint32_t>(exponent == 0);
    const uint32_t magnitude = (inf_nan & is_inf_nan) | (subnormal & is_subnormal) |
                               (bits & ~(is_inf_nan | is_subnormal));
    u[j] = magnitude | ((x & 0x8000u) << 16);
  }
}

inline void narrow_to_f16_portable(const float* in, Half* out, int64_t n) {
  const uint32_t* u = reinterpret_cast<const uint32_t*>(in);
  uint16_t* h = reinterpret_cast<uint16_t*>(out);
  constexpr uint32_t kInfinity = 255u << 23;
  constexpr uint32_t kF16Overflow = (127u + 16u) << 23;  // 65536: 65520 and up round to inf
  constexpr uint32_t kSubnormalBelow = 113u << 23;       // 2^-14, the smallest normal f16
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const float denorm_magic = __builtin_bit_cast(float, kDenormMagic);
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t sign = u[j] & 0x80000000u;
    const uint32_t x = u[j] ^ sign;
    const uint32_t special = x > kInfinity ? 0x7E00u : 0x7C00u;
    const uint32_t subnormal =
        __builtin_bit_cast(uint32_t, __builtin_bit_cast(float, x) + denorm_magic) - kDenormMagic;
    const uint32_t normal = (x + 0xC8000FFFu + ((x >> 13) & 1u)) >> 13;
    const uint32_t is_special = 0u - static_cast<uint32_t>(x >= kF16Overflow);
    const uint32_t is_subnormal = 0u - static_cast<uint32_t>(x < kSubnormalBelow);
    const uint32_t magnitude = (special & is_special) | (subnormal & is_subnormal) |
                               (normal & ~(is_special | is_subnormal));
    h[j] = static_cast<uint16_t>(magnitude | (sign >> 16));
  }
}

// The same conversions, by the CPU's instructions where it has them (f16_convert.cc).
void widen_f16(const Half* in, float* out, int64_t n);
void narrow_to_f16(const float* in, Half* out, int64_t n);

}  // namespace cpu
}  // namespace tessera
