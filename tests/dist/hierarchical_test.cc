// Hierarchical all-reduce on 4 ranks as 2 emulated nodes of 2 (and as 1 node of 4, 4 of 1):
// the same sums as the flat ring, bit for bit on values that add exactly, for even and uneven
// sizes; each level's ledger holds its formula's bytes (inside the node 2 (G-1)/G n, across
// nodes 2 (N/G-1)/(N/G) n/G); DDP with the hook ends 3 SGD steps where flat DDP does; on one
// machine MPI's detection finds one node of all the ranks. The hierarchical reduce-scatter and
// all-gather equal the flat ones bit for bit (uneven and empty segments; sum, mean, max), send
// their formulas' bytes per level, and through HierarchicalGroup ZeRO-2 and ZeRO-3 train as
// with the flat world.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/hierarchical_all_reduce.h"
#include "dist/hierarchical_reduce_scatter.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/zero_optimizer.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

// Small integers: every order of addition gives the same f32 sum.
Tensor integer_values(int64_t n, int rank) {
  Tensor t = empty({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>((i * 7 + rank * 3) % 11 - 5);
  return t;
}

TEST(Hierarchical, EqualsTheFlatRingBitForBit) {
  auto w = world();
  const int n = w->size();
  for (int g = 1; g <= n; ++g) {
    if (n % g != 0) continue;
    const NodeGroups nodes = NodeGroups::emulated(g);
    for (int64_t size : {1, 7, 1000, 4097}) {
      Tensor flat = integer_values(size, w->rank()), hier = integer_values(size, w->rank());
      w->all_reduce(flat)->wait();
      hierarchical_all_reduce(nodes, hier)->wait();
      EXPECT_EQ(max_abs_diff(flat, hier), 0.0) << "G = " << g << ", " << size << " elements";
    }
  }
}

TEST(Hierarchical, EachLevelSendsItsFormulasBytes) {
  auto w = world();
  const int n = w->size();
  if (n != 4) GTEST_SKIP() << "2 nodes of 2 need 4 ranks";
  const NodeGroups nodes = NodeGroups::emulated(2);
  const int64_t elements = 1000;  // divisible by G and by G x nodes
  nodes.intra_node()->ledger().reset();
  nodes.inter_node()->ledger().reset();
  Tensor t = integer_values(elements, w->rank());
  hierarchical_all_reduce(nodes, t)->wait();
  // Inside the node (G = 2): reduce-scatter and all-gather, each (G-1)/G of the buffer.
  EXPECT_EQ(nodes.intra_node()->ledger().total_bytes(), 2 * (elements / 2) * 4);
  // Across the 2 nodes: a ring all-reduce of the 500-element shard, 2 (2-1)/2 of it.
  EXPECT_EQ(nodes.inter_node()->ledger().total_bytes(), (elements / 2) * 4);
  EXPECT_EQ(nodes.node(), w->rank() / 2);
  EXPECT_EQ(nodes.local_rank(), w->rank() % 2);
}

TEST(Hierarchical, DdpWithTheHookEndsWhereFlatDdpDoes) {
  auto w = world();
  if (w->size() % 2 != 0) GTEST_SKIP() << "nodes of 2";
  auto train = [&](bool hierarchical) {
    manual_seed(3);
    auto model = models::MLP(20, 32, 4);
    DistributedDataParallel ddp(model, w, DDPOptions().bucket_cap_mb(0.001));
    if (hierarchical) {
      ddp.register_comm_hook(std::make_shared<HierarchicalAllReduceHook>(NodeGroups::emulated(2)));
    }
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      Generator g(50 * step + w->rank());
      const Tensor x = randn({6, 20}, kF32, &g);
      opt.zero_grad();
      const Variable out = ddp.forward(Variable(x));
      cross_entropy(out, argmax(x.narrow(1, 0, 4), 1)).backward();
      opt.step();
    }
    return model;
  };
  auto flat = train(false), hier = train(true);
  const auto a = flat->parameters(), b = hier->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LT(max_abs_diff(a[i].data(), b[i].data()), 1e-6) << a[i].name();
  }
}

TEST(Hierarchical, ReduceScatterAndAllGatherEqualTheFlatOnesBitForBit) {
  auto w = world();
  const int n = w->size();
  // Uneven segments, one of them empty (rank 1's), as ZeRO's shards of an odd-sized model.
  std::vector<int64_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back(r == 1 ? 0 : 3 + 2 * r);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  for (int g = 1; g <= n; ++g) {
    if (n % g != 0) continue;
    const NodeGroups nodes = NodeGroups::emulated(g);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      const Tensor input = integer_values(total, w->rank());
      Tensor flat = empty({counts[w->rank()]}), hier = empty({counts[w->rank()]});
      w->reduce_scatter(input, flat, counts, op)->wait();
      hierarchical_reduce_scatter(nodes, input, hier, counts, op)->wait();
      EXPECT_EQ(max_abs_diff(flat, hier), 0.0) << "G = " << g << ", op " << static_cast<int>(op);
    }
    const Tensor mine = integer_values(counts[w->rank()], w->rank());
    Tensor flat = empty({total}), hier = empty({total});
    w->all_gather(mine, flat, counts)->wait();
    hierarchical_all_gather(nodes, mine, hier, counts)->wait();
    EXPECT_EQ(max_abs_diff(flat, hier), 0.0) << "all-gather, G = " << g;
  }
}

TEST(Hierarchical, TheReduceScatterSendsAnNthOfTheBufferAcrossNodes) {
  auto w = world();
  if (w->size() != 4) GTEST_SKIP() << "2 nodes of 2 need 4 ranks";
  const NodeGroups nodes = NodeGroups::emulated(2);
  const int64_t elements = 1000;  // 250 per rank
  nodes.intra_node()->ledger().reset();
  nodes.inter_node()->ledger().reset();
  Tensor out = empty({250});
  hierarchical_reduce_scatter(nodes, integer_values(elements, w->rank()), out,
                              std::vector<int64_t>(4, 250))->wait();
  // Inside the node: (G-1)/G of the buffer; across the 2 nodes: (2-1)/2 of this rank's 500.
  EXPECT_EQ(nodes.intra_node()->ledger().total_bytes(), (elements / 2) * 4);
  EXPECT_EQ(nodes.inter_node()->ledger().total_bytes(), 250 * 4);
}

// ZeRO-2 and ZeRO-3 given a HierarchicalGroup end 3 SGD steps where they end over the world.
TEST(Hierarchical, ZeroTrainsThroughTheHierarchicalGroupAsOverTheWorld) {
  auto w = world();
  if (w->size() % 2 != 0) GTEST_SKIP() << "nodes of 2";
  auto hierarchical = std::make_shared<HierarchicalGroup>(w, NodeGroups::emulated(2));
  auto batch = [&](int step) {
    Generator g(70 * step + w->rank());
    return randn({6, 20}, kF32, &g);
  };
  auto zero2 = [&](std::shared_ptr<ProcessGroup> group) {
    manual_seed(5);
    auto model = models::MLP(20, 32, 4);
    ZeroRedundancyOptimizer opt(model->parameters(), group, [](std::vector<Variable> shard) {
      return std::make_unique<optim::SGD>(shard, optim::SGDOptions(0.1));
    }, ZeroOptions().stage(2).bucket_cap_mb(0.001));
    for (int step = 0; step < 3; ++step) {
      const Tensor x = batch(step);
      opt.zero_grad();
      cross_entropy(model->forward(Variable(x)), argmax(x.narrow(1, 0, 4), 1)).backward();
      opt.step();
    }
    return model->parameters();
  };
  const auto a = zero2(w), b = zero2(hierarchical);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LT(max_abs_diff(a[i].data(), b[i].data()), 1e-6) << "ZeRO-2 " << a[i].name();
  }
  auto zero3 = [&](std::shared_ptr<ProcessGroup> group) {
    manual_seed(5);
    auto model = models::MLP(20, 32, 4);
    FullyShardedDataParallel fsdp(model, group, FullyShardedOptions());
    optim::SGD opt(fsdp.shard_parameters(), optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      const Tensor x = batch(step);
      opt.zero_grad();
      cross_entropy(fsdp.forward(Variable(x)), argmax(x.narrow(1, 0, 4), 1)).backward();
      opt.step();
    }
    std::vector<Tensor> shards;
    for (const Variable& s : fsdp.shard_parameters()) shards.push_back(s.data().clone());
    return shards;
  };
  const auto c = zero3(w), d = zero3(hierarchical);
  ASSERT_EQ(c.size(), d.size());
  for (size_t i = 0; i < c.size(); ++i) EXPECT_LT(max_abs_diff(c[i], d[i]), 1e-6) << "ZeRO-3 shard " << i;
}

TEST(Hierarchical, OneMachineIsOneNode) {
  const NodeGroups nodes = NodeGroups::detect();
  EXPECT_EQ(nodes.ranks_per_node(), world()->size());
  EXPECT_EQ(nodes.nodes(), 1);
  EXPECT_EQ(nodes.intra_node()->size(), world()->size());
  EXPECT_EQ(nodes.inter_node()->size(), 1);
}

TEST(Hierarchical, RanksPerNodeMustDivideTheWorld) {
  if (world()->size() < 3) GTEST_SKIP();
  EXPECT_THROW(NodeGroups::emulated(world()->size() - 1), std::exception);
}

}  // namespace
}  // namespace dist
}  // namespace tessera
