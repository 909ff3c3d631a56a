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

QSGD::QSGD(int levels, uint64_t seed, int64_t bucket)
    : levels_(levels), seed_(seed), bucket_(bucket) {
  TS_CHECK(levels >= 1 && levels <= (1 << 20), "QSGD: levels must be in [1, 2^20], got ", levels);
  TS_CHECK(bucket >= 1, "QSGD: the bucket (entries per norm) must be at least 1, got ", bucket);
  int bits = 0;
  while ((1 << bits) < levels + 1) ++bits;  // levels 0..s
  width_ = 1 + bits;
}

std::string QSGD::name() const {
  return "qsgd:" + std::to_string(levels_) + ":" + std::to_string(bucket_);
}

int64_t QSGD::norm_count(int64_t n) const { return (n + bucket_ - 1) / bucket_; }

int64_t QSGD::message_bytes(int64_t n) const { return 4 * norm_count(n) + packed_bytes(n, width_); }

Tensor QSGD::compress(const Tensor& x_in, const CompressContext& ctx) {
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  const float* v = x.data<float>();
  const uint64_t s = draw_seed(seed_, ctx.step, ctx.bucket, ctx.rank);
  std::vector<float> norms(static_cast<size_t>(norm_count(n)));
  std::vector<uint32_t> codes(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < norm_count(n); ++b) {
    const int64_t begin = b * bucket_, end = std::min(n, begin + bucket_);
    double squares = 0;
    for (int64_t i = begin; i < end; ++i) squares += static_cast<double>(v[i]) * v[i];
    const float norm = static_cast<float>(std::sqrt(squares));
    norms[b] = norm;
    // A zero sub-bucket sends level 0 everywhere; a non-finite one (inf or NaN entries) sends
    // its norm as it is, which decodes to non-finite values (inf * 0 is NaN), and codes 0.
    if (!(norm > 0) || !std::isfinite(norm)) continue;
    const double scale = levels_ / static_cast<double>(norm);
    // Philox gives four draws a block: entry i's is word i % 4 of block i / 4 (uniform(s, i)),
    // whatever the sub-buckets.
    std::array<uint32_t, 4> words{};
    for (int64_t i = begin; i < end; ++i) {
      if (i == begin || i % 4 == 0) words = philox4x32(s, static_cast<uint64_t>(i) / 4);
      const double r = std::fabs(static_cast<double>(v[i])) * scale;
      double level = std::floor(r);
      if (words[i % 4] * (1.0 / 4294967296.0) < r - level) level += 1;
      if (level > levels_) level = levels_;  // rounding of |x_i| / norm above 1
      codes[i] = (static_cast<uint32_t>(level) << 1) | (v[i] < 0 ? 1u : 0u);
    }
  }
  Tensor message = empty({message_bytes(n)}, kU8);
  uint8_t* m = message.data<uint8_t>();
  std::memcpy(m, norms.data(), 4 * norms.size());
  pack_bits(codes.data(), n, width_, m + 4 * norms.size());
  return message;
}

void QSGD::decompress_add(const Tensor& message_in, Tensor& out, const CompressContext&) const {
  const Tensor message = message_in.contiguous();
  const int64_t n = out.numel();
  TS_CHECK(message.numel() == message_bytes(n), "QSGD (", name(), "): a message of ",
           message.numel(), " bytes for ", n, " elements; the format says ", message_bytes(n));
  const uint8_t* m = message.data<uint8_t>();
  std::vector<float> norms(static_cast<size_t>(norm_count(n)));
  std::memcpy(norms.data(), m, 4 * norms.size());
  std::vector<uint32_t> codes(static_cast<size_t>(n));
  unpack_bits(m + 4 * norms.size(), n, width_, codes.data());
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float unit = norms[i / bucket_] / static_cast<float>(levels_);
    const float magnitude = unit * static_cast<float>(codes[i] >> 1);
    o[i] += (codes[i] & 1u) ? -magnitude : magnitude;
  }
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
