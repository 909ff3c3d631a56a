#include "dist/compression/qsgd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "dist/compression/bit_packing.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace compression {

QSGD::QSGD(int levels, uint64_t seed) : levels_(levels), seed_(seed) {
  TS_CHECK(levels >= 1 && levels <= (1 << 20), "QSGD: levels must be in [1, 2^20], got ", levels);
  int bits = 0;
  while ((1 << bits) < levels + 1) ++bits;  // levels 0..s
  width_ = 1 + bits;
}

int64_t QSGD::message_bytes(int64_t n) const { return 4 + packed_bytes(n, width_); }

Tensor QSGD::compress(const Tensor& x_in, const CompressContext& ctx) {
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  const float* v = x.data<float>();
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) squares += static_cast<double>(v[i]) * v[i];
  const float norm = static_cast<float>(std::sqrt(squares));
  const uint64_t s = draw_seed(seed_, ctx.step, ctx.bucket, ctx.rank);
  std::vector<uint32_t> codes(static_cast<size_t>(n), 0);
  if (norm > 0) {
    const double scale = levels_ / static_cast<double>(norm);
    for (int64_t i = 0; i < n; i += 4) {
      // One Philox block gives the draws of four entries (uniform(s, i) for i .. i + 3).
      const std::array<uint32_t, 4> words = philox4x32(s, static_cast<uint64_t>(i) / 4);
      for (int64_t j = i; j < std::min<int64_t>(n, i + 4); ++j) {
        const double r = std::fabs(static_cast<double>(v[j])) * scale;
        double level = std::floor(r);
        if (words[j - i] * (1.0 / 4294967296.0) < r - level) level += 1;
        if (level > levels_) level = levels_;  // rounding of |x_j| / norm above 1
        codes[j] = (static_cast<uint32_t>(level) << 1) | (v[j] < 0 ? 1u : 0u);
      }
    }
  }
  Tensor message = empty({message_bytes(n)}, kU8);
  uint8_t* m = message.data<uint8_t>();
  std::memcpy(m, &norm, 4);
  pack_bits(codes.data(), n, width_, m + 4);
  return message;
}

void QSGD::decompress_add(const Tensor& message_in, Tensor& out, const CompressContext&) const {
  const Tensor message = message_in.contiguous();
  const int64_t n = out.numel();
  TS_CHECK(message.numel() == message_bytes(n), "QSGD: a message of ", message.numel(),
           " bytes for ", n, " elements; the format says ", message_bytes(n));
  const uint8_t* m = message.data<uint8_t>();
  float norm;
  std::memcpy(&norm, m, 4);
  std::vector<uint32_t> codes(static_cast<size_t>(n));
  unpack_bits(m + 4, n, width_, codes.data());
  float* o = out.data<float>();
  const float unit = norm / static_cast<float>(levels_);
  for (int64_t i = 0; i < n; ++i) {
    const float magnitude = unit * static_cast<float>(codes[i] >> 1);
    o[i] += (codes[i] & 1u) ? -magnitude : magnitude;
  }
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
