// dist::Topology's groups, literally, for the layouts the train tool builds: the world rank
// ((stage x D + replica) x C + cp_rank) x T + tp_rank (topology.h), each group's world ranks in
// group-rank order. Runs on 4 and 8 ranks.
#include <gtest/gtest.h>

#include <vector>

#include "dist/environment.h"
#include "dist/topology.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

using Ranks = std::vector<int>;

TEST(Topology, TensorTimesContextParallelOnFourRanks) {
  auto world = dist::world();
  if (world->size() != 4) GTEST_SKIP() << "the 4-rank layout";
  const Topology topo(world, 1, /*tp=*/2, /*cp=*/2);
  const int r = world->rank();
  EXPECT_EQ(topo.data_parallel_size(), 1);
  EXPECT_EQ(topo.tensor_parallel_rank(), r % 2);
  EXPECT_EQ(topo.context_parallel_rank(), r / 2);
  const std::vector<Ranks> tp = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  const std::vector<Ranks> cp = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
  EXPECT_EQ(topo.tensor_parallel_group()->world_ranks(), tp[r]);
  EXPECT_EQ(topo.context_parallel_group()->world_ranks(), cp[r]);
  // Gradients average over every rank holding the same slices: D x C = the cp group here.
  EXPECT_EQ(topo.data_parallel_group()->world_ranks(), cp[r]);
  EXPECT_EQ(topo.replica_group()->world_ranks(), Ranks{r});
  EXPECT_EQ(topo.pipeline_group()->world_ranks(), Ranks{r});
}

TEST(Topology, DataTimesContextTimesTensorParallelOnEightRanks) {
  auto world = dist::world();
  if (world->size() != 8) GTEST_SKIP() << "the 8-rank layout";
  const int r = world->rank();
  {
    const Topology topo(world, 1, /*tp=*/2, /*cp=*/2);  // D = 2
    EXPECT_EQ(topo.data_parallel_size(), 2);
    EXPECT_EQ(topo.replica(), r / 4);
    EXPECT_EQ(topo.context_parallel_rank(), (r / 2) % 2);
    const std::vector<Ranks> dp = {{0, 2, 4, 6}, {1, 3, 5, 7}};
    const std::vector<Ranks> replicas = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    EXPECT_EQ(topo.data_parallel_group()->world_ranks(), dp[r % 2]);
    EXPECT_EQ(topo.replica_group()->world_ranks(), replicas[r % 4]);
    const int base = r - r % 2;
    EXPECT_EQ(topo.tensor_parallel_group()->world_ranks(), (Ranks{base, base + 1}));
    const int first = (r / 4) * 4 + r % 2;
    EXPECT_EQ(topo.context_parallel_group()->world_ranks(), (Ranks{first, first + 2}));
  }
  {
    const Topology topo(world, /*stages=*/2, /*tp=*/2, /*cp=*/2);  // D = 1
    EXPECT_EQ(topo.stage(), r / 4);
    EXPECT_EQ(topo.pipeline_group()->world_ranks(), (Ranks{r % 4, r % 4 + 4}));
    const int stage = (r / 4) * 4;
    EXPECT_EQ(topo.data_parallel_group()->world_ranks(), (Ranks{stage + r % 2, stage + r % 2 + 2}));
  }
  {
    const Topology topo(world, /*stages=*/2, /*tp=*/2);  // the 3-D layout without cp: unchanged
    const std::vector<Ranks> dp = {{0, 2}, {1, 3}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {4, 6}, {5, 7}};
    EXPECT_EQ(topo.data_parallel_group()->world_ranks(), dp[r]);
    EXPECT_EQ(topo.replica_group()->world_ranks(), dp[r]);
    EXPECT_EQ(topo.pipeline_group()->world_ranks(), (Ranks{r % 4, r % 4 + 4}));
  }
}

TEST(Topology, ALayoutThatDoesNotDivideTheWorldIsAnError) {
  auto world = dist::world();
  testing::expect_error([&] { Topology(world, 1, 3, 1); },
                        "ranks cannot be split into 1 pipeline stages x 1 context-parallel ranks "
                        "x 3 tensor-parallel ranks");
}

}  // namespace
}  // namespace dist
}  // namespace tessera
