#include "dist/zero/partition.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace zero {

Range intersect(const Range& a, const Range& b) {
  const int64_t begin = std::max(a.begin, b.begin), end = std::min(a.end, b.end);
  return end > begin ? Range{begin, end} : Range{begin, begin};
}

FlatLayout flat_layout(const std::vector<int64_t>& numels) {
  FlatLayout layout;
  for (size_t i = 0; i < numels.size(); ++i) {
    TS_CHECK(numels[i] >= 0, "flat_layout: tensor ", i, " has ", numels[i], " elements");
    layout.ranges.push_back({layout.total, layout.total + numels[i]});
    layout.total += numels[i];
  }
  return layout;
}

std::vector<Range> balanced_shards(int64_t total, int ranks) {
  TS_CHECK(ranks > 0 && total >= 0, "balanced_shards: ", total, " elements over ", ranks, " ranks");
  std::vector<Range> shards;
  int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t size = total / ranks + (r < total % ranks ? 1 : 0);
    shards.push_back({at, at + size});
    at += size;
  }
  return shards;
}

int64_t padded_size(int64_t total, int ranks) {
  TS_CHECK(ranks > 0 && total >= 0, "padded_size: ", total, " elements over ", ranks, " ranks");
  return (total + ranks - 1) / ranks * ranks;
}

std::vector<int64_t> counts_within(const Range& range, const std::vector<Range>& shards) {
  std::vector<int64_t> counts;
  for (const Range& shard : shards) counts.push_back(intersect(range, shard).size());
  return counts;
}

std::vector<int64_t> sizes(const std::vector<Range>& ranges) {
  std::vector<int64_t> out;
  for (const Range& r : ranges) out.push_back(r.size());
  return out;
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
