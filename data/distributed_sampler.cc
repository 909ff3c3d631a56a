#include "data/distributed_sampler.h"

#include <numeric>

#include "tensor/check.h"

namespace tessera {
namespace data {

DistributedSampler::DistributedSampler(int64_t n, const DistributedSamplerOptions& o)
    : n_(n), replicas_(o.replicas()), rank_(o.rank()), shuffle_(o.shuffle()), seed_(o.seed()),
      drop_last_(o.drop_last()), pad_(o.pad()) {
  TS_CHECK(n >= 0, "DistributedSampler: negative dataset size ", n);
  TS_CHECK(replicas_ >= 1 && rank_ >= 0 && rank_ < replicas_, "DistributedSampler: rank ", rank_,
           " outside [0, ", replicas_, ")");
}

int64_t DistributedSampler::size() const {
  if (drop_last_) return n_ / replicas_;
  if (pad_) return (n_ + replicas_ - 1) / replicas_;
  return n_ / replicas_ + (rank_ < n_ % replicas_ ? 1 : 0);
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = random_permutation(n_, seed_ * 1000003ull + static_cast<uint64_t>(epoch));
  } else {
    order = indices_0_to(n_, "DistributedSampler");
  }
  int64_t total = n_;
  if (drop_last_) {
    total = n_ / replicas_ * replicas_;
  } else if (pad_ && n_ > 0) {
    total = (n_ + replicas_ - 1) / replicas_ * replicas_;
    for (int64_t i = n_; i < total; ++i) order.push_back(order[i - n_]);
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += replicas_) mine.push_back(order[i]);
  return mine;
}

}  // namespace data
}  // namespace tessera
