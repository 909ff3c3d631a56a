#include "cost/link.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

Link Link::from(double latency_us, double bandwidth_gbps) {
  TS_CHECK(latency_us >= 0, "Link: latency must be >= 0 us, got ", latency_us);
  TS_CHECK(bandwidth_gbps > 0, "Link: bandwidth must be > 0 Gb/s, got ", bandwidth_gbps);
  return Link{latency_us * 1e-6, bandwidth_gbps * 1e9 / 8};
}

}  // namespace cost
}  // namespace tessera
