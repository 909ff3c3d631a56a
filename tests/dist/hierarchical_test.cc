// Hierarchical all-reduce on 4 ranks as 2 emulated nodes of 2 (and as 1 node of 4, 4 of 1):
// the same sums as the flat ring, bit for bit on values that add exactly, for even and uneven
// sizes; each level's ledger holds its formula's bytes (inside the node 2 (G-1)/G n, across
// nodes 2 (N/G-1)/(N/G) n/G); DDP with the hook ends 3 SGD steps where flat DDP does; on one
// machine MPI's detection finds one node of all the ranks.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/ddp.h"
#include "dist/environment.h"
#include "dist/hierarchical_all_reduce.h"
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
