// L floats as one GCC vector (L = 16 or 8), and the few operations the direct convolution
// kernels and batch norm need on them: unaligned loads and stores, a partial load, a sum
// across lanes and an L x L transpose. GCC lowers a vector to one zmm register with AVX-512
// (16 floats) or one ymm with AVX2 (8 floats), and to several narrower ones otherwise, so code
// using them compiles for any x86-64 target.
//
// Every helper is always inlined: a vector passed by value across a call would change ABI
// with the instruction set (hence -Wno-psabi on the libraries that include this).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace tessera {
namespace cpu {
namespace simd {

// The attribute must sit on a typedef inside a class template: on an alias template GCC drops
// it, silently leaving a plain float.
template <int L>
struct VecOf {
  typedef float type __attribute__((vector_size(L * sizeof(float))));
  typedef int32_t index __attribute__((vector_size(L * sizeof(int32_t))));
};
template <int L>
using VecT = typename VecOf<L>::type;
template <int L>
using IndexT = typename VecOf<L>::index;
static_assert(sizeof(VecT<16>) == 16 * sizeof(float), "VecT must be a real vector type");

// Sixteen lanes: the width batch norm's sums use on every machine.
constexpr int kLanes = 16;
using Vec = VecT<kLanes>;

#define TS_SIMD_INLINE inline __attribute__((always_inline))

template <int L = kLanes>
TS_SIMD_INLINE VecT<L> load(const float* p) {
  VecT<L> v;
  std::memcpy(&v, p, sizeof(v));  // an unaligned vector load
  return v;
}

// The first n (<= L) floats at p; the other lanes zero.
template <int L = kLanes>
TS_SIMD_INLINE VecT<L> load_first(const float* p, int64_t n) {
  if (n == L) return load<L>(p);
  VecT<L> v = {};
  std::memcpy(&v, p, n * sizeof(float));
  return v;
}

template <int L>
TS_SIMD_INLINE void store(float* p, VecT<L> v) {
  std::memcpy(p, &v, sizeof(v));
}

// Copies one short row (a few dozen floats): an inline loop the compiler vectorizes, cheaper
// than a library call per row.
TS_SIMD_INLINE void copy_row(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// Shuffle indexes (>= L picks from the second operand). swap_mask: lane i takes lane i ^ H.
// lo_mask / hi_mask: see transpose_stage.
template <int L, int H, size_t... I>
constexpr IndexT<L> swap_mask(std::index_sequence<I...>) {
  return IndexT<L>{static_cast<int32_t>(I ^ H)...};
}
template <int L, int B, size_t... I>
constexpr IndexT<L> lo_mask(std::index_sequence<I...>) {
  return IndexT<L>{static_cast<int32_t>((I & B) ? L + I - B : I)...};
}
template <int L, int B, size_t... I>
constexpr IndexT<L> hi_mask(std::index_sequence<I...>) {
  return IndexT<L>{static_cast<int32_t>((I & B) ? L + I : I + B)...};
}

// The sum of the L lanes, halving the vector log2(L) times (lane 0 gathers the total).
template <int L>
TS_SIMD_INLINE float sum_lanes(VecT<L> v) {
  if constexpr (L > 1) {
    // After v += (v with its halves swapped), both halves hold the same partial sums.
    v += __builtin_shuffle(v, swap_mask<L, L / 2>(std::make_index_sequence<L>()));
    if constexpr (L / 2 > 1) {
      v += __builtin_shuffle(v, swap_mask<L, L / 4>(std::make_index_sequence<L>()));
    }
    if constexpr (L / 4 > 1) {
      v += __builtin_shuffle(v, swap_mask<L, L / 8>(std::make_index_sequence<L>()));
    }
    if constexpr (L / 8 > 1) {
      v += __builtin_shuffle(v, swap_mask<L, L / 16>(std::make_index_sequence<L>()));
    }
  }
  return v[0];
}

// One stage of the transpose: rows r and r + B (r & B == 0) swap their off-diagonal B x B
// blocks. Row r takes the lanes with bit B clear from itself and the others from row r + B,
// shifted down by B; row r + B the rest. After the stages B = L/2, ..., 2, 1 the matrix is
// transposed.
template <int L, int B>
TS_SIMD_INLINE void transpose_stage(VecT<L> (&rows)[L]) {
  constexpr IndexT<L> lo = lo_mask<L, B>(std::make_index_sequence<L>());
  constexpr IndexT<L> hi = hi_mask<L, B>(std::make_index_sequence<L>());
#pragma GCC unroll 16
  for (int r = 0; r < L; ++r) {
    if (r & B) continue;
    const VecT<L> a = rows[r], b = rows[r + B];
    rows[r] = __builtin_shuffle(a, b, lo);
    rows[r + B] = __builtin_shuffle(a, b, hi);
  }
}

// rows[i][j] becomes rows[j][i].
template <int L>
TS_SIMD_INLINE void transpose(VecT<L> (&rows)[L]) {
  if constexpr (L >= 16) transpose_stage<L, 8>(rows);
  if constexpr (L >= 8) transpose_stage<L, 4>(rows);
  transpose_stage<L, 2>(rows);
  transpose_stage<L, 1>(rows);
}

// The vector extensions the direct convolution kernels are compiled for. They keep 16 or more
// vectors of sums in registers: AVX-512 has 32 registers of 16 floats; AVX2 has 16 of 8, so
// there the kernels use 8-float vectors and smaller tiles (compiled with 16-float vectors for
// AVX2, every sum was spilled: the forward convolution ran at 3.6 GFLOP/s against 140).
#define TS_AVX512 __attribute__((target("avx512f")))
#define TS_AVX2 __attribute__((target("avx2,fma")))

enum class Level { kNone = 0, kAvx2 = 1, kAvx512 = 2 };

// What this machine runs, capped by the environment variable TESSERA_SIMD=avx2|none (for
// tests and comparisons; anything else, or unset, caps nothing).
inline Level level() {
  static const Level detected = [] {
    Level l = Level::kNone;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) l = Level::kAvx2;
    if (__builtin_cpu_supports("avx512f")) l = Level::kAvx512;
    const char* cap = std::getenv("TESSERA_SIMD");
    if (cap != nullptr && std::strcmp(cap, "none") == 0) return Level::kNone;
    if (cap != nullptr && std::strcmp(cap, "avx2") == 0 && l == Level::kAvx512) {
      return Level::kAvx2;
    }
    return l;
  }();
  return detected;
}

}  // namespace simd
}  // namespace cpu
}  // namespace tessera
