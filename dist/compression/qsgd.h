// QSGD (Alistarh, Grubic, Li, Tomioka, Vojnovic, "QSGD: Communication-Efficient SGD via Gradient
// Quantization and Encoding", NeurIPS 2017): stochastic quantization of each entry to one of s
// levels of its sub-bucket's 2-norm, unbiased. All-gather transport (each rank's norms are its
// own).
//
// The DDP bucket (a quarter of a million entries and more) is cut into sub-buckets of d
// consecutive entries (the paper's "bucket", d = 512 by default; the last one may be shorter),
// each quantized against its own norm. The paper's Lemma 3.1 bounds the variance a vector of d
// entries gets:
//
//   E ||Q(x) - x||^2 <= min(d / s^2, sqrt(d) / s) ||x||^2
//
// so with one norm over all n entries the error grows as sqrt(n) / s: at n = 270,000 and s = 16
// the bound is 32 ||x||^2 and a Gaussian x gets about 22 (noise 4.7 times the gradient's norm).
// Per sub-bucket of 512 the bound is 1.4 ||x||^2 and a Gaussian x gets 0.33, for 4 more bytes
// per 512 entries (a 1% larger message at s = 16).
//
// For each sub-bucket B, and i in B:
//
//   r_i = |x_i| / ||x_B||_2 * s  in [0, s];  level_i = floor(r_i) + (u_i < r_i - floor(r_i))
//   D:  x_i ~ ||x_B||_2 * sign(x_i) * level_i / s          (E[level_i] = r_i: unbiased)
//
// with u_i uniform in [0, 1) from the Philox stream of (seed, step, bucket, rank), the i-th
// draw for the i-th entry of the whole bucket.
//
// Wire format: ceil(n / d) norms (f32, 4 bytes each, sub-bucket by sub-bucket), then n codes
// of w = 1 + ceil(log2(s + 1)) bits packed least significant bit first (bit_packing.h):
// code = level << 1 | (x_i < 0). 4 ceil(n / d) + ceil(n w / 8) bytes: s = 1 (ternary) takes
// 2 bits per entry, s = 16 takes 6.
//
//   n = 5, d = 2:  | norm [x0 x1] | norm [x2 x3] | norm [x4] | 5 codes |   12 + ceil(5 w / 8)
#pragma once

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

// The paper's bucket size, and qsgd:LEVELS's.
inline constexpr int64_t kQsgdBucket = 512;

class QSGD : public Compressor {
 public:
  // levels s >= 1; bucket d >= 1 entries per norm.
  explicit QSGD(int levels, uint64_t seed = 0, int64_t bucket = kQsgdBucket);
  // "qsgd:16:512": the levels, then the entries per norm.
  std::string name() const override;
  Transport transport() const override { return Transport::kAllGather; }
  int64_t message_bytes(int64_t n) const override;
  bool unbiased() const override { return true; }
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override;
  int bits_per_element() const { return width_; }
  int64_t bucket() const { return bucket_; }
  // The norms a message of n entries carries: ceil(n / d).
  int64_t norm_count(int64_t n) const;

 private:
  int levels_;
  int width_;
  uint64_t seed_;
  int64_t bucket_;
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
