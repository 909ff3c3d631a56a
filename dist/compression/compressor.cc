#include "dist/compression/compressor.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace compression {

Tensor decompress(const Compressor& c, const Tensor& message, int64_t n, const CompressContext& ctx) {
  Tensor out = zeros({n}, kF32);
  c.decompress_add(message, out, ctx);
  return out;
}

int64_t sparse_count(double ratio, int64_t n) {
  return std::min<int64_t>(n, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ratio * n))));
}

std::string with_ratio(const char* kind, double ratio) {
  std::ostringstream s;
  s << kind << ":" << ratio;
  return s.str();
}

uint64_t draw_seed(uint64_t seed, int64_t step, size_t bucket, int rank) {
  // splitmix64 over the fields: distinct keys give unrelated Philox streams.
  uint64_t z = seed;
  for (uint64_t v : {static_cast<uint64_t>(step), static_cast<uint64_t>(bucket),
                     static_cast<uint64_t>(static_cast<uint32_t>(rank))}) {
    z += 0x9E3779B97F4A7C15ull + v;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
  }
  return z;
}

uint32_t random_word(uint64_t seed, uint64_t i) { return philox4x32(seed, i / 4)[i % 4]; }

double uniform(uint64_t seed, uint64_t i) {
  // 32 random bits: 2^-32 resolution, enough for stochastic rounding.
  return random_word(seed, i) * (1.0 / 4294967296.0);
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
