// ZeRO's partition arithmetic, literally: the flat layout, balanced and padded shards, and the
// reduce-scatter counts of a bucket (the example drawn in dist/zero/partition.h).
#include "dist/zero/partition.h"

#include <gtest/gtest.h>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace zero {
namespace {

using Ranges = std::vector<Range>;
using Counts = std::vector<int64_t>;

TEST(ZeroPartition, FlatLayoutLaysTensorsEndToEnd) {
  const FlatLayout l = flat_layout({6, 3, 5});
  EXPECT_EQ(l.total, 14);
  EXPECT_EQ(l.ranges, (Ranges{{0, 6}, {6, 9}, {9, 14}}));
  EXPECT_EQ(flat_layout({}).total, 0);
  EXPECT_THROW(flat_layout({2, -1}), Error);
}

TEST(ZeroPartition, BalancedShardsDifferByAtMostOneLargerFirst) {
  EXPECT_EQ(balanced_shards(14, 3), (Ranges{{0, 5}, {5, 10}, {10, 14}}));
  EXPECT_EQ(balanced_shards(12, 4), (Ranges{{0, 3}, {3, 6}, {6, 9}, {9, 12}}));
  // Fewer elements than ranks: the last ranks own nothing.
  EXPECT_EQ(balanced_shards(2, 4), (Ranges{{0, 1}, {1, 2}, {2, 2}, {2, 2}}));
  EXPECT_EQ(balanced_shards(7, 1), (Ranges{{0, 7}}));
  EXPECT_THROW(balanced_shards(7, 0), Error);
}

TEST(ZeroPartition, PaddedSizeIsTheNextMultipleOfTheRanks) {
  EXPECT_EQ(padded_size(14, 3), 15);
  EXPECT_EQ(padded_size(15, 3), 15);
  EXPECT_EQ(padded_size(1, 4), 4);
  EXPECT_EQ(padded_size(0, 4), 0);
}

TEST(ZeroPartition, IntersectAndBucketCounts) {
  EXPECT_EQ(intersect({0, 6}, {5, 10}), (Range{5, 6}));
  EXPECT_TRUE(intersect({0, 5}, {5, 10}).empty());
  EXPECT_TRUE(intersect({7, 9}, {0, 3}).empty());
  const Ranges shards = balanced_shards(14, 3);  // 0-4 | 5-9 | 10-13
  // A bucket holding p1 and p2 (elements 6..13) falls in ranks 1 and 2 only.
  EXPECT_EQ(counts_within({6, 14}, shards), (Counts{0, 4, 4}));
  // A bucket holding p0 alone (0..5) straddles ranks 0 and 1.
  EXPECT_EQ(counts_within({0, 6}, shards), (Counts{5, 1, 0}));
}

}  // namespace
}  // namespace zero
}  // namespace dist
}  // namespace tessera
