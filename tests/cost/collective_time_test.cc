// The alpha-beta collective times against cases worked out by hand.
#include "cost/collective_time.h"

#include <gtest/gtest.h>

#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

const Link kLink{1e-5, 1e9};  // 10 us, 1 GB/s

TEST(Link, FromMicrosecondsAndGigabits) {
  const Link l = Link::from(5, 100);
  EXPECT_DOUBLE_EQ(l.latency, 5e-6);
  EXPECT_DOUBLE_EQ(l.bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(l.message_seconds(1e6), 5e-6 + 8e-5);
  testing::expect_error([] { Link::from(5, 0); }, "bandwidth must be > 0 Gb/s, got 0");
}

TEST(CollectiveTime, Ring) {
  // 2 (N-1) a + 2 (N-1)/N n/b = 6 x 10 us + 1.5 x 1 ms
  EXPECT_DOUBLE_EQ(ring_all_reduce_seconds(4, 1e6, kLink), 6e-5 + 1.5e-3);
  EXPECT_DOUBLE_EQ(ring_reduce_scatter_seconds(4, 1e6, kLink), 3e-5 + 0.75e-3);
  EXPECT_DOUBLE_EQ(ring_all_gather_seconds(4, 1e6, kLink), 3e-5 + 0.75e-3);
  EXPECT_EQ(ring_all_reduce_seconds(1, 1e6, kLink), 0);
}

TEST(CollectiveTime, DoubleBinaryTree) {
  EXPECT_DOUBLE_EQ(tree_all_reduce_seconds(4, 1e6, kLink), 4e-5 + 2e-3);   // 2 x 2 a + 2 n/b
  EXPECT_DOUBLE_EQ(tree_all_reduce_seconds(5, 1e6, kLink), 6e-5 + 2e-3);   // ceil(log2 5) = 3
  EXPECT_EQ(tree_all_reduce_seconds(1, 1e6, kLink), 0);
}

TEST(CollectiveTime, Hierarchical) {
  Network net;
  net.inter = kLink;
  net.intra = Link{1e-6, 1e10};
  net.ranks_per_node = 4;
  // 8 ranks on 2 nodes, 8 MB: inside the node 2 x 3 x (1 us + 2 MB / 10 GB/s) = 1.206 ms; across
  // the 2 nodes an all-reduce of 2 MB, ring 2 x (10 us + 1 ms) = 2.02 ms < tree 4.02 ms.
  EXPECT_NEAR(hierarchical_all_reduce_seconds(8, 8e6, net), 1.206e-3 + 2.02e-3, 1e-12);
  // One node: a ring over the intra-node link.
  EXPECT_DOUBLE_EQ(hierarchical_all_reduce_seconds(4, 8e6, net), ring_all_reduce_seconds(4, 8e6, net.intra));
  testing::expect_error([&] { hierarchical_all_reduce_seconds(6, 8e6, net); },
                        "ranks per node (4) to divide the ranks (6)");
  net.algorithm = Algorithm::kHierarchical;
  // Reduce-scatter in two levels: 3 x (1 us + 0.2 ms) inside, 1 x (10 us + 1 MB / 1 GB/s) across.
  EXPECT_NEAR(reduce_scatter_time(8, 8e6, net).seconds, 6.03e-4 + 1.01e-3, 1e-12);
}

TEST(CollectiveTime, PickerTakesTheTreeForSmallMessagesAtScale) {
  Network net;
  net.inter = Link::from(5, 100);
  const CollectiveTime small = all_reduce_time(4096, 1e6, net);
  EXPECT_EQ(small.algorithm, Algorithm::kTree);
  EXPECT_DOUBLE_EQ(small.seconds, 2 * 12 * 5e-6 + 2e6 / 12.5e9);
  // The ring would pay 2 x 4095 latencies: 41 ms.
  EXPECT_GT(ring_all_reduce_seconds(4096, 1e6, net.inter), 0.04);
  const CollectiveTime large = all_reduce_time(8, 1e9, net);
  EXPECT_EQ(large.algorithm, Algorithm::kRing);
  EXPECT_DOUBLE_EQ(large.seconds, ring_all_reduce_seconds(8, 1e9, net.inter));
  net.algorithm = Algorithm::kRing;
  EXPECT_EQ(all_reduce_time(4096, 1e6, net).algorithm, Algorithm::kRing);
}

TEST(CollectiveTime, ParsesNames) {
  EXPECT_EQ(parse_algorithm("tree"), Algorithm::kTree);
  EXPECT_STREQ(algorithm_name(Algorithm::kHierarchical), "hierarchical");
  testing::expect_error([] { parse_algorithm("mesh"); }, "unknown collective algorithm 'mesh'");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
