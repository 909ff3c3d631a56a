// Samplers: the order in which a DataLoader visits a dataset's examples, epoch by epoch.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices for one epoch (their count is size()).
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  virtual int64_t size() const = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A fresh permutation every epoch, a function of (seed, epoch) only.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed = 0);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

// Fisher-Yates over [0, n) driven by Philox counters: the same (n, seed) gives the same
// permutation on every machine and build.
// 0, 1, ..., n-1; out of memory is an error naming `who`, n and the bytes.
std::vector<int64_t> indices_0_to(int64_t n, const char* who);
std::vector<int64_t> random_permutation(int64_t n, uint64_t seed);

}  // namespace data
}  // namespace tessera
