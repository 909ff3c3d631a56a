// Random-k sparsification (Stich et al. 2018; Wangni et al. 2018): every rank keeps the same k =
// ceil(ratio n) randomly chosen entries of its bucket, scaled by n / k so that the estimate is
// unbiased (E[C(x)] = x). All-reduce transport: the indices come from a Philox stream keyed by
// (seed, step, bucket) only, so they are the same on every rank and the k values add up.
//
// Wire format: k f32 values x[i_1..i_k] (indices ascending), 4k bytes; the indices are not sent.
// Decompression: out[i_j] += (n / k) value_j.
//
// Error feedback does not suit the scaled estimate: the residual y - (n/k) y_chosen is n/k - 1
// times the chosen entries, so it grows from step to step (make_hook.h leaves it off for the
// unbiased compressors).
#pragma once

#include <vector>

#include "dist/compression/compressor.h"

namespace tessera {
namespace dist {
namespace compression {

class RandomK : public Compressor {
 public:
  explicit RandomK(double ratio, uint64_t seed = 0);  // ratio in (0, 1]
  std::string name() const override;
  Transport transport() const override { return Transport::kAllReduce; }
  int64_t message_bytes(int64_t n) const override { return 4 * k(n); }
  bool unbiased() const override { return true; }
  Tensor compress(const Tensor& x, const CompressContext& ctx) override;
  void decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const override;
  int64_t k(int64_t n) const;
  // The k indices of a bucket of n elements at (step, bucket): ascending, distinct.
  std::vector<int64_t> indices(int64_t n, const CompressContext& ctx) const;

 private:
  double ratio_;
  uint64_t seed_;
};

}  // namespace compression
}  // namespace dist
}  // namespace tessera
