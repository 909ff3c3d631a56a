// DistributedSampler: each of `replicas` ranks visits its own share of the dataset, as
// torch.utils.data.DistributedSampler.
//
// The epoch's order (a permutation of (seed, epoch) when shuffling, the same on every rank) is
// made a multiple of `replicas` long, by repeating its first examples (padding, the default) or
// by dropping its tail (drop_last), and rank r takes every replicas-th example from position r:
//
//   order:  7 2 9 0 4 1 8 3 6 5 | 7 2   (padded to 12 for 4 ranks)
//   rank 1:   2       1       6     2
//
// so every rank sees the same number of batches. For evaluation, pad = false gives uneven
// shards that together cover each example exactly once.
#pragma once

#include "data/sampler.h"

namespace tessera {
namespace data {

//   DistributedSampler sampler(dataset->size(), DistributedSamplerOptions(world->size(),
//                                                   world->rank()).seed(1));
class DistributedSamplerOptions {
 public:
  DistributedSamplerOptions(int64_t replicas, int64_t rank) : replicas_(replicas), rank_(rank) {}
  DistributedSamplerOptions& shuffle(bool s) { shuffle_ = s; return *this; }
  DistributedSamplerOptions& seed(uint64_t s) { seed_ = s; return *this; }
  DistributedSamplerOptions& drop_last(bool d) { drop_last_ = d; return *this; }
  // false: uneven shards covering each example once (evaluation).
  DistributedSamplerOptions& pad(bool p) { pad_ = p; return *this; }
  int64_t replicas() const { return replicas_; }
  int64_t rank() const { return rank_; }
  bool shuffle() const { return shuffle_; }
  uint64_t seed() const { return seed_; }
  bool drop_last() const { return drop_last_; }
  bool pad() const { return pad_; }

 private:
  int64_t replicas_, rank_;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  bool drop_last_ = false, pad_ = true;
};

class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, const DistributedSamplerOptions& options);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override;

 private:
  int64_t n_, replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_, pad_;
};

}  // namespace data
}  // namespace tessera
