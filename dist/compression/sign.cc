#include "dist/compression/sign.h"

#include <cmath>
#include <cstring>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace compression {

Tensor Sign::compress(const Tensor& x_in, const CompressContext&) {
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  const float* v = x.data<float>();
  Tensor message = zeros({message_bytes(n)}, kU8);
  uint8_t* m = message.data<uint8_t>();
  double l1 = 0;
  // Eight signs per byte, least significant bit first (bit_packing.h's order for width 1).
  for (int64_t i = 0; i < n; ++i) {
    l1 += std::fabs(static_cast<double>(v[i]));
    if (v[i] >= 0) m[4 + (i >> 3)] |= static_cast<uint8_t>(1u << (i & 7));
  }
  const float scale = n > 0 ? static_cast<float>(l1 / static_cast<double>(n)) : 0.0f;
  std::memcpy(m, &scale, 4);
  return message;
}

void Sign::decompress_add(const Tensor& message_in, Tensor& out, const CompressContext&) const {
  const Tensor message = message_in.contiguous();
  const int64_t n = out.numel();
  TS_CHECK(message.numel() == message_bytes(n), "Sign: a message of ", message.numel(),
           " bytes for ", n, " elements; the format says ", message_bytes(n));
  const uint8_t* m = message.data<uint8_t>();
  float scale;
  std::memcpy(&scale, m, 4);
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    o[i] += ((m[4 + (i >> 3)] >> (i & 7)) & 1u) ? scale : -scale;
  }
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
