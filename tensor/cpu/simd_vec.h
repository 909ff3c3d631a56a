// Sixteen floats as one GCC vector, and the few operations the direct convolution kernels and
// batch norm need on them: unaligned loads and stores, a partial load, a sum across lanes and a
// 16 x 16 transpose. GCC lowers these to one zmm register with AVX-512, two ymm with AVX2 and
// four xmm otherwise, so code using them compiles for any x86-64 target.
//
// Every helper is always inlined: a vector passed by value across a call would change ABI
// with the instruction set (hence -Wno-psabi on the libraries that include this).
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {
namespace cpu {
namespace simd {

constexpr int kLanes = 16;

// The attribute must sit on a typedef inside a class template: on an alias template GCC drops
// it, silently leaving a plain float.
template <int N>
struct VecOf {
  typedef float type __attribute__((vector_size(N * sizeof(float))));
};
using Vec = VecOf<kLanes>::type;
typedef int32_t LaneIndex __attribute__((vector_size(kLanes * sizeof(int32_t))));
static_assert(sizeof(Vec) == kLanes * sizeof(float), "Vec must be a real vector type");

#define TS_SIMD_INLINE inline __attribute__((always_inline))

TS_SIMD_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));  // an unaligned vector load
  return v;
}

// The first n (<= kLanes) floats at p; the other lanes zero.
TS_SIMD_INLINE Vec load_first(const float* p, int64_t n) {
  if (n == kLanes) return load(p);
  Vec v = {};
  std::memcpy(&v, p, n * sizeof(float));
  return v;
}

TS_SIMD_INLINE void store(float* p, Vec v) { std::memcpy(p, &v, sizeof(v)); }

// Copies one short row (a few dozen floats): an inline loop the compiler vectorizes, cheaper
// than a library call per row.
TS_SIMD_INLINE void copy_row(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// One stage of the transpose: rows r and r + B (r & B == 0) swap their off-diagonal B x B
// blocks. lo takes lanes with bit B clear from row r and the others from row r + B, shifted
// down by B; hi is the rest. After the stages B = 8, 4, 2, 1 the matrix is transposed.
template <int B>
TS_SIMD_INLINE void transpose_stage(Vec (&rows)[kLanes], LaneIndex lo, LaneIndex hi) {
#pragma GCC unroll 16
  for (int r = 0; r < kLanes; ++r) {
    if (r & B) continue;
    const Vec a = rows[r], b = rows[r + B];
    rows[r] = __builtin_shuffle(a, b, lo);
    rows[r + B] = __builtin_shuffle(a, b, hi);
  }
}

// rows[i][j] becomes rows[j][i]. (Shuffle indexes >= 16 pick from the second operand.)
TS_SIMD_INLINE void transpose(Vec (&rows)[kLanes]) {
  transpose_stage<8>(rows, LaneIndex{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                     LaneIndex{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
  transpose_stage<4>(rows, LaneIndex{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                     LaneIndex{4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31});
  transpose_stage<2>(rows, LaneIndex{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                     LaneIndex{2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
  transpose_stage<1>(rows, LaneIndex{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                     LaneIndex{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
}

// The sum of the 16 lanes, halving the vector four times (lane 0 gathers the total).
TS_SIMD_INLINE float sum_lanes(Vec v) {
  v += __builtin_shuffle(v, LaneIndex{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
  v += __builtin_shuffle(v, LaneIndex{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
  v += __builtin_shuffle(v, LaneIndex{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
  v += __builtin_shuffle(v, LaneIndex{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
  return v[0];
}

// For kernels that keep 16 or more of these vectors in registers: AVX-512 has 32 vector
// registers of 16 floats; AVX2's 16 registers of 8 floats would hold only half of those sums,
// and the compiler spills every one (measured: the forward convolution ran at 3.6 GFLOP/s
// compiled for AVX2, against 140 for AVX-512). Such a kernel is compiled for AVX-512 alone and
// called only where has_avx512() says the machine runs it.
#define TS_AVX512 __attribute__((target("avx512f")))

inline bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

}  // namespace simd
}  // namespace cpu
}  // namespace tessera
