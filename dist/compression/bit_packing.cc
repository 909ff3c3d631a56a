#include "dist/compression/bit_packing.h"


#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace compression {

int64_t packed_bytes(int64_t n, int width) { return (n * width + 7) / 8; }

void pack_bits(const uint32_t* codes, int64_t n, int width, uint8_t* out) {
  TS_CHECK(width >= 1 && width <= 32, "pack_bits: width must be 1..32, got ", width);
  // A 64-bit accumulator: codes go in at its top end, whole bytes leave at its bottom.
  uint64_t acc = 0;
  int bits = 0;
  int64_t at = 0;
  const uint64_t mask = width == 32 ? 0xFFFFFFFFull : (1ull << width) - 1;
  for (int64_t i = 0; i < n; ++i) {
    acc |= (codes[i] & mask) << bits;
    bits += width;
    while (bits >= 8) {
      out[at++] = static_cast<uint8_t>(acc);
      acc >>= 8;
      bits -= 8;
    }
  }
  if (bits > 0) out[at++] = static_cast<uint8_t>(acc);
}

void unpack_bits(const uint8_t* in, int64_t n, int width, uint32_t* codes) {
  TS_CHECK(width >= 1 && width <= 32, "unpack_bits: width must be 1..32, got ", width);
  uint64_t acc = 0;
  int bits = 0;
  int64_t at = 0;
  const uint64_t mask = width == 32 ? 0xFFFFFFFFull : (1ull << width) - 1;
  for (int64_t i = 0; i < n; ++i) {
    while (bits < width) {
      acc |= static_cast<uint64_t>(in[at++]) << bits;
      bits += 8;
    }
    codes[i] = static_cast<uint32_t>(acc & mask);
    acc >>= width;
    bits -= width;
  }
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
