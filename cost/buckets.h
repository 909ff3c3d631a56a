// DDP's gradient buckets from parameter sizes alone: the same assignment as
// dist/ddp/ddp.cc (DistributedDataParallel::build_buckets) makes from the Variables, so the models
// can price a bucket order without building the model. Reverse registration order; a bucket
// closes once it reaches its cap, the first one's smaller (1 MB) so communication starts early:
//
//   parameters (registration order):  p0 p1 p2 p3 p4 p5
//   buckets:                          [p5 p4] [p3 p2 p1] [p0]    bucket 0 fills first
//
// One dtype for all gradients (DDP also closes a bucket where the dtype changes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {
namespace cost {

struct BucketPlan {
  std::vector<size_t> parameters;  // indices in registration order, as the bucket holds them
  int64_t bytes = 0;
};

// parameter_bytes[i]: parameter i's gradient bytes, in registration order.
std::vector<BucketPlan> assign_buckets(const std::vector<int64_t>& parameter_bytes,
                                       double first_bucket_mb = 1, double bucket_cap_mb = 25);

}  // namespace cost
}  // namespace tessera
