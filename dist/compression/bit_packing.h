// Fixed-width codes packed end to end into bytes, least significant bit first: code i occupies
// bits [i w, (i + 1) w) of the byte string. QSGD and sign compression use it.
//
//   w = 3:  codes 5 (101) 2 (010) 7 (111)  ->  byte 0 = 0b11_010_101, byte 1 = 0b0000000_1
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace dist {
namespace compression {

// Bytes n codes of `width` bits take.
int64_t packed_bytes(int64_t n, int width);
// Packs codes[0..n) (each < 2^width, width 1..32) into out[0..packed_bytes(n, width)).
void pack_bits(const uint32_t* codes, int64_t n, int width, uint8_t* out);
void unpack_bits(const uint8_t* in, int64_t n, int width, uint32_t* codes);

}  // namespace compression
}  // namespace dist
}  // namespace tessera
