// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): four
// 32-bit random words for (seed, counter), and the mappings from bits to floats.
//
// Header-only and callable from host and device code, so the CPU and CUDA kernels draw exactly
// the same numbers for the same (seed, counter).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif

namespace tessera {

struct PhiloxWords {
  uint32_t w[4];
  TS_HOST_DEVICE uint32_t operator[](int i) const { return w[i]; }
};

TS_HOST_DEVICE inline PhiloxWords philox4x32_10(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// A float in [0, 1) from 32 random bits (24 bits of mantissa).
TS_HOST_DEVICE inline float uniform_from_bits(uint32_t bits) {
  return (bits >> 8) * (1.0f / 16777216.0f);
}
// A double in [0, 1) from 64 random bits (53 bits of mantissa).
TS_HOST_DEVICE inline double uniform_double_from_bits(uint32_t hi, uint32_t lo) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(x) * (1.0 / 9007199254740992.0);
}

}  // namespace tessera
