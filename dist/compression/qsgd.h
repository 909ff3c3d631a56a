// QSGD (Alistarh et al. 2017): stochastic quantization of each entry to one of s levels of the
// bucket's 2-norm, unbiased. All-gather transport (each rank's norm is its own).
//
//   r_i = |x_i| / ||x||_2 * s  in [0, s];  level_i = floor(r_i) + (u_i < r_i - floor(r_i))
//   D:  x_i ~ ||x||_2 * sign(x_i) * level_i / s          (E[level_i] = r_i: unbiased)
//
// with u_i uniform in [0, 1) from the Philox stream of (seed, step, bucket, rank).
//
// Wire format: the norm (f32, 4 bytes), then n codes of w = 1 + ceil(log2(s + 1)) bits packed
// least significant bit first (bit_packing.h): code = level << 1 | (x_i < 0). 4 + ceil(n w / 8)
// bytes: s = 1 (ternary) takes 2 bits per entry, s = 16 takes 6.
#pragma once

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class QSGD : public Compressor {
 public:
  explicit QSGD(int levels, uint64_t seed = 0);  // s >= 1
  std::string name() const override { return "qsgd:" + std::to_string(levels_); }
  Transport transport() const override { return Transport::kAllGather; }
  int64_t message_bytes(int64_t n) const override;
  bool unbiased() const override { return true; }
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override;
  int bits_per_element() const { return width_; }

 private:
  int levels_;
  int width_;
  uint64_t seed_;
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
