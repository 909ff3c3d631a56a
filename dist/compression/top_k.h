// Top-k sparsification (Aji & Heafield 2017; Stich et al. 2018 with error feedback): each rank
// sends the k = ceil(ratio n) entries of largest magnitude of its bucket. Biased: use it with
// error feedback. All-gather transport (ranks pick different indices).
//
// Wire format, 8k bytes: k f32 values, then their k i32 indices (ascending), little-endian as in
// memory.
//
// Selection is exact: std::nth_element over the magnitudes, O(n) on average, ties broken by the
// lower index so every run picks the same entries (no sampled threshold: the bench measures
// what exactness costs).
#pragma once

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class TopK : public Compressor {
 public:
  explicit TopK(double ratio);  // in (0, 1]
  std::string name() const override;
  Transport transport() const override { return Transport::kAllGather; }
  int64_t message_bytes(int64_t n) const override { return 8 * k(n); }
  bool unbiased() const override { return false; }
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override;
  int64_t k(int64_t n) const;

 private:
  double ratio_;
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
