// Datasets: something that turns a list of example indices into a batch.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace tessera {
namespace data {

struct Batch {
  Tensor inputs;   // [B, ...]
  Tensor targets;  // [B] class indices (i64) or [B, ...]
  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Batch get_batch(const std::vector<int64_t>& indices) const = 0;
};

// Examples are rows of two tensors with the same first dimension.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets);
  int64_t size() const override { return inputs_.size(0); }
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_, targets_;
};

// Random images for throughput benchmarks and tests: example i is a deterministic function of
// (seed, i): label = a draw in [0, classes), image = N(0, 1) noise plus a per-class offset, so
// the task is learnable. Nothing is stored; images are made when asked for.
class SyntheticImages : public Dataset {
 public:
  SyntheticImages(int64_t n, int64_t channels, int64_t height, int64_t width, int64_t classes,
                  uint64_t seed = 0);
  int64_t size() const override { return n_; }
  Batch get_batch(const std::vector<int64_t>& indices) const override;

 private:
  int64_t n_, c_, h_, w_, classes_;
  uint64_t seed_;
};

}  // namespace data
}  // namespace tessera
