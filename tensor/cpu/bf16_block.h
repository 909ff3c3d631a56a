// bf16 <-> f32 in loops the compiler vectorizes, for the elementwise kernels' bf16 runs.
//
// bf16 is the top half of an f32: widening is a 16-bit shift; narrowing rounds to nearest even
// by adding 0x7FFF plus the lowest kept bit before dropping the low half. Eigen::bfloat16 does
// the same arithmetic one element at a time, through a branchy conversion GCC does not
// vectorize, which made bf16 ReLU, add and their backward several times slower than f32 (they
// dominated a bf16 ResNet-20 step once batch norm kept bf16 activations). Here both directions
// are plain integer loops over blocks of kBf16Block elements; the result is bit for bit
// Eigen's (NaNs become its quiet NaN, sign kept).
//
//   bf16 run ─ widen ─> float[256] ─ f(x) ─> float[256] ─ narrow ─> bf16 run
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/cpu/f16_block.h"
#include "tensor/dtype.h"
#include "tensor/half.h"

namespace tessera {
namespace cpu {

inline constexpr int64_t kBf16Block = 256;

inline void widen_bf16(const BFloat16* in, float* out, int64_t n) {
  const uint16_t* b = reinterpret_cast<const uint16_t*>(in);
  uint32_t* u = reinterpret_cast<uint32_t*>(out);
  for (int64_t j = 0; j < n; ++j) u[j] = static_cast<uint32_t>(b[j]) << 16;
}

inline void narrow_to_bf16(const float* in, BFloat16* out, int64_t n) {
  const uint32_t* u = reinterpret_cast<const uint32_t*>(in);
  uint16_t* b = reinterpret_cast<uint16_t*>(out);
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t x = u[j];
    const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    const bool nan = (x & 0x7FFFFFFFu) > 0x7F800000u;
    b[j] = static_cast<uint16_t>(nan ? ((x >> 16) & 0x8000u) | 0x7FC0u : rounded);
  }
}

// The same under names generic code can call for any element type (inside a dispatch lambda,
// `if constexpr` on its scalar type does not discard the other types' branches): the bf16 and
// f16 (f16_block.h) overloads are the fast ones; the others convert one element at a time.
// kBlockWidened<T>: the kernels run T a block at a time through f32 buffers.
template <typename T>
inline constexpr bool kBlockWidened = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

template <typename T>
inline void widen(const T* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(in[j]);
}
inline void widen(const BFloat16* in, float* out, int64_t n) { widen_bf16(in, out, n); }
inline void widen(const Half* in, float* out, int64_t n) { widen_f16(in, out, n); }
template <typename T>
inline void narrow(const float* in, T* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<T>(in[j]);
}
inline void narrow(const float* in, BFloat16* out, int64_t n) { narrow_to_bf16(in, out, n); }
inline void narrow(const float* in, Half* out, int64_t n) { narrow_to_f16(in, out, n); }

}  // namespace cpu
}  // namespace tessera
