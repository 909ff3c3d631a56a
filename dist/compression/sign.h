// Sign compression, 1 bit per entry with one scale per bucket (signSGD, Bernstein et al. 2018;
// with error feedback, EF-signSGD, Karimireddy et al. 2019): C(x) = (||x||_1 / n) sign(x).
// Biased: use it with error feedback. All-gather transport (each rank's scale is its own).
//
// Wire format: the scale ||x||_1 / n (f32, 4 bytes), then n bits packed 8 per byte, least
// significant bit first (bit_packing.h): 1 for x_i >= 0 (zero counts as +), 0 for x_i < 0.
// 4 + ceil(n / 8) bytes: 32x fewer than f32.
#pragma once

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class Sign : public Compressor {
 public:
  std::string name() const override { return "sign"; }
  Transport transport() const override { return Transport::kAllGather; }
  int64_t message_bytes(int64_t n) const override { return 4 + (n + 7) / 8; }
  bool unbiased() const override { return false; }
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override;
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
