// ZeRO-1 against DDP (equal to 1e-6 after 5 steps), its per-rank state bytes (~1/N), the
// consolidated state (equal to an unsharded optimizer's), re-sharding on load, and its
// communication volume (equal to DDP's all-reduce).
#include "dist/zero_optimizer.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/ddp.h"
#include "dist/environment.h"
#include "dist/module_sync.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kPerRank = 5;

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(11);
  auto m = models::MLP(784, 24, 10);
  m->to(kF64);
  return m;
}

std::pair<Tensor, Tensor> rank_batch(int step, int world, int rank) {
  Generator g(500 + step);
  const Tensor x = randn({kPerRank * world, 1, 28, 28}, kF64, &g);
  const Tensor y = arange(kPerRank * world, kI64);
  const Tensor labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);
  return {x.narrow(0, rank * kPerRank, kPerRank), labels.narrow(0, rank * kPerRank, kPerRank)};
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable>)>;

MakeOpt adam() {
  return [](std::vector<Variable> p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3)); };
}
MakeOpt sgd() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  };
}

void zero_matches_ddp(const MakeOpt& make) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = make(ddp_model->parameters());
  auto zero_model = mlp();
  broadcast_module_states(*zero_model, *world);
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, make);
  for (int step = 0; step < 5; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    ddp_opt->zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    ddp_opt->step();
    zero.zero_grad();
    cross_entropy(zero_model->forward(Variable(x)), y).backward();  // local gradients only
    zero.step();
  }
  const auto a = ddp_model->parameters(), b = zero_model->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i].data(), b[i].data()), 1e-6) << i;
}

TEST(Zero1, EqualsDdpWithAdam) { zero_matches_ddp(adam()); }
TEST(Zero1, EqualsDdpWithSgdMomentumAndWeightDecay) { zero_matches_ddp(sgd()); }

TEST(Zero1, StateBytesPerRankAreAboutOneNth) {
  auto world = dist::world();
  const int N = world->size();
  auto model = mlp();
  ZeroRedundancyOptimizer zero(model->parameters(), world, adam());
  auto full_model = mlp();
  optim::Adam full(full_model->parameters(), optim::AdamOptions());
  const auto [x, y] = rank_batch(0, N, world->rank());
  cross_entropy(model->forward(Variable(x)), y).backward();
  zero.step();
  cross_entropy(full_model->forward(Variable(x)), y).backward();
  full.step();
  const int64_t psi = model->num_parameters();
  EXPECT_EQ(full.state_bytes(), 2 * 8 * psi);                 // two f64 moments per parameter
  EXPECT_EQ(zero.state_bytes(), 2 * 8 * zero.shard_numel());  // ...for this rank's shard only
  EXPECT_LE(zero.shard_numel(), (psi + N - 1) / N);
  EXPECT_GE(zero.shard_numel(), psi / N);
}

TEST(Zero1, ConsolidatedStateEqualsAnUnshardedOptimizersAndLoadsBack) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  optim::Adam plain(ddp_model->parameters(), optim::AdamOptions(1e-3));
  auto zero_model = mlp();
  broadcast_module_states(*zero_model, *world);
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, adam());
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    plain.zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    plain.step();
    zero.zero_grad();
    cross_entropy(zero_model->forward(Variable(x)), y).backward();
    zero.step();
  }
  const StateDict mine = zero.consolidated_state_dict();
  const StateDict theirs = plain.state_dict();
  ASSERT_EQ(mine.size(), theirs.size());
  for (const auto& [name, t] : theirs) {
    ASSERT_TRUE(mine.contains(name)) << name;
    EXPECT_EQ(mine.at(name).shape(), t.shape()) << name;
    EXPECT_LT(max_abs_diff(mine.at(name), t), 1e-9) << name;
  }
  // A fresh ZeRO optimizer loading the consolidated state continues exactly like the first.
  auto resumed_model = mlp();
  resumed_model->load_state_dict(zero_model->state_dict());
  ZeroRedundancyOptimizer resumed(resumed_model->parameters(), world, adam());
  resumed.load_state_dict(mine);
  const auto [x, y] = rank_batch(9, N, r);
  for (auto* pair : {&zero, &resumed}) {
    nn::Sequential& m = pair == &zero ? *zero_model : *resumed_model;
    pair->zero_grad();
    cross_entropy(m.forward(Variable(x)), y).backward();
    pair->step();
  }
  const auto a = zero_model->parameters(), b = resumed_model->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(max_abs_diff(a[i].data(), b[i].data()), 0) << i;
}

TEST(Zero1, SendsAsManyBytesAsDdp) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto model = mlp();
  ZeroRedundancyOptimizer zero(model->parameters(), world, sgd());
  const auto [x, y] = rank_batch(0, N, r);
  cross_entropy(model->forward(Variable(x)), y).backward();
  world->ledger().reset();
  zero.step();
  const int64_t psi = model->num_parameters();
  const std::vector<int64_t> c = balanced_counts(psi, N);
  const int64_t ring = (2 * psi - c[r] - c[(r + 1) % N]) * 8;  // one f64 all-reduce's worth
  EXPECT_EQ(world->ledger().total_bytes(), N > 1 ? ring : 0);
}

}  // namespace
}  // namespace dist
}  // namespace tessera
