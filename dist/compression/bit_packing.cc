#include "dist/compression/bit_packing.h"

#include <cstring>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace compression {

int64_t packed_bytes(int64_t n, int width) { return (n * width + 7) / 8; }

void pack_bits(const uint32_t* codes, int64_t n, int width, uint8_t* out) {
  TS_CHECK(width >= 1 && width <= 32, "pack_bits: width must be 1..32, got ", width);
  std::memset(out, 0, static_cast<size_t>(packed_bytes(n, width)));
  int64_t bit = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t code = codes[i];
    for (int b = 0; b < width; ++b, ++bit) {
      if ((code >> b) & 1u) out[bit >> 3] |= static_cast<uint8_t>(1u << (bit & 7));
    }
  }
}

void unpack_bits(const uint8_t* in, int64_t n, int width, uint32_t* codes) {
  TS_CHECK(width >= 1 && width <= 32, "unpack_bits: width must be 1..32, got ", width);
  int64_t bit = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t code = 0;
    for (int b = 0; b < width; ++b, ++bit) {
      code |= static_cast<uint32_t>((in[bit >> 3] >> (bit & 7)) & 1u) << b;
    }
    codes[i] = code;
  }
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
