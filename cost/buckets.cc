#include "cost/buckets.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

std::vector<BucketPlan> assign_buckets(const std::vector<int64_t>& parameter_bytes,
                                       double first_bucket_mb, double bucket_cap_mb) {
  TS_CHECK(first_bucket_mb > 0 && bucket_cap_mb > 0, "assign_buckets: caps must be > 0 MB, got ",
           first_bucket_mb, " and ", bucket_cap_mb);
  std::vector<BucketPlan> buckets;
  BucketPlan current;
  for (size_t k = parameter_bytes.size(); k-- > 0;) {
    current.parameters.push_back(k);
    current.bytes += parameter_bytes[k];
    const double cap_mb = buckets.empty() ? first_bucket_mb : bucket_cap_mb;
    if (static_cast<double>(current.bytes) >= cap_mb * 1024 * 1024) {
      buckets.push_back(std::move(current));
      current = BucketPlan();
    }
  }
  if (!current.parameters.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace cost
}  // namespace tessera
