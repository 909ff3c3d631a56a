// ZeRO stages 1 and 2 against DDP (equal to 1e-6 after 5 steps, with gradient accumulation and
// an unused parameter too), per-rank optimizer-state bytes (~1/N) and, for stage 2, gradient
// bytes measured by the allocator (~1/N), the consolidated state (equal to an unsharded
// optimizer's), re-sharding on load, clipping, communication volume (equal to DDP's
// all-reduce), each rank's shard of the averaged gradient (shard_gradient()), and the error
// when DDP and ZeRO would both reduce the same gradients.
#include "dist/zero/zero_optimizer.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/module_sync.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

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

class ZeroStage : public ::testing::TestWithParam<int> {
 protected:
  ZeroOptions options() const { return ZeroOptions().stage(GetParam()).bucket_cap_mb(0.01); }
};

void zero_matches_ddp(const MakeOpt& make, const ZeroOptions& options) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = make(ddp_model->parameters());
  auto zero_model = mlp();
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, make, options);
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

TEST_P(ZeroStage, EqualsDdpWithAdam) { zero_matches_ddp(adam(), options()); }
TEST_P(ZeroStage, EqualsDdpWithSgdMomentumAndWeightDecay) { zero_matches_ddp(sgd(), options()); }

// shard_gradient() (documented in ZERO.md: where a stage-2 gradient lives, the parameters
// having none) is this rank's slice of DDP's averaged gradient, flattened in parameter order:
// after backward for stage 2, after clip_grad_norm() for stage 1.
TEST_P(ZeroStage, ShardGradientIsThisRanksSliceOfTheAveragedGradient) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto zero_model = mlp();
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, sgd(), options());
  const auto [x, y] = rank_batch(0, N, r);
  cross_entropy(ddp.forward(Variable(x)), y).backward();
  cross_entropy(zero_model->forward(Variable(x)), y).backward();
  if (GetParam() == 1) zero.clip_grad_norm(1e9);  // reduces stage 1's gradients, clips nothing
  std::vector<double> flat;
  for (const Variable& p : ddp_model->parameters()) {
    const std::vector<double> g = p.grad().to_vector<double>();
    flat.insert(flat.end(), g.begin(), g.end());
  }
  const std::vector<double> shard = zero.shard_gradient().to_vector<double>();
  ASSERT_EQ(static_cast<int64_t>(shard.size()), zero.shard_numel());
  ASSERT_LE(zero.shard_offset() + zero.shard_numel(), static_cast<int64_t>(flat.size()));
  for (size_t i = 0; i < shard.size(); ++i) {
    ASSERT_NEAR(shard[i], flat[zero.shard_offset() + i], 1e-12) << "element " << i;
  }
}

TEST_P(ZeroStage, StateBytesPerRankAreAboutOneNth) {
  auto world = dist::world();
  const int N = world->size();
  auto model = mlp();
  ZeroRedundancyOptimizer zero(model->parameters(), world, adam(), options());
  auto full_model = mlp();
  optim::Adam full(full_model->parameters(), optim::AdamOptions());
  const auto [x, y] = rank_batch(0, N, world->rank());
  cross_entropy(model->forward(Variable(x)), y).backward();
  zero.step();
  cross_entropy(full_model->forward(Variable(x)), y).backward();
  full.step();
  const int64_t psi = model->num_parameters();
  EXPECT_EQ(full.state_bytes(), 2 * 8 * psi);                 // two f64 moments per parameter
  // ...for this rank's shard only, plus the f64 master shard it steps.
  EXPECT_EQ(zero.state_bytes(), 3 * 8 * zero.shard_numel());
  EXPECT_LE(zero.shard_numel(), (psi + N - 1) / N);
  EXPECT_GE(zero.shard_numel(), psi / N);
}

TEST_P(ZeroStage, ConsolidatedStateEqualsAnUnshardedOptimizersAndLoadsBack) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  optim::Adam plain(ddp_model->parameters(), optim::AdamOptions(1e-3));
  auto zero_model = mlp();
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, adam(), options());
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    plain.zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    plain.step();
    zero.zero_grad();
    cross_entropy(zero_model->forward(Variable(x)), y).backward();
    zero.step();
  }
  const StateDict mine = zero.state_dict();  // collective
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
  ZeroRedundancyOptimizer resumed(resumed_model->parameters(), world, adam(), options());
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

TEST_P(ZeroStage, SendsAsManyBytesAsDdp) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto model = mlp();
  // One bucket, so stage 2's reduce-scatter is one ring like stage 1's.
  ZeroRedundancyOptimizer zero(model->parameters(), world, sgd(), options().bucket_cap_mb(25));
  const auto [x, y] = rank_batch(0, N, r);
  world->ledger().reset();
  cross_entropy(model->forward(Variable(x)), y).backward();
  zero.step();
  const int64_t psi = model->num_parameters();
  const std::vector<int64_t> c = balanced_counts(psi, N);
  const int64_t ring = (2 * psi - c[r] - c[(r + 1) % N]) * 8;  // one f64 all-reduce's worth
  EXPECT_EQ(world->ledger().total_bytes(), N > 1 ? ring : 0);
}

TEST_P(ZeroStage, GradientAccumulationAndAnUnusedParameterEqualDdp) {
  // Two backward passes per step, and a parameter the forward never uses (it still gets
  // weight decay, as DDP's optimizer gives it with find_unused_parameters).
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto with_unused = [] {
    auto m = mlp();
    m->register_parameter("unused", ones({3}, kF64));
    return m;
  };
  auto ddp_model = with_unused();
  DistributedDataParallel ddp(ddp_model, world, DDPOptions().find_unused_parameters(true));
  auto ddp_opt = sgd()(ddp_model->parameters());
  auto zero_model = with_unused();
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, sgd(), options());
  for (int step = 0; step < 3; ++step) {
    ddp_opt->zero_grad();
    zero.zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      const auto [x, y] = rank_batch(10 * step + micro, N, r);
      cross_entropy(ddp.forward(Variable(x)), y).backward();
      cross_entropy(zero_model->forward(Variable(x)), y).backward();
    }
    ddp_opt->step();
    zero.step();
  }
  const auto a = ddp_model->parameters(), b = zero_model->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i].data(), b[i].data()), 1e-9) << i;
}

TEST_P(ZeroStage, ClipGradNormEqualsClippingDdpsAveragedGradients) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = sgd()(ddp_model->parameters());
  auto zero_model = mlp();
  ZeroRedundancyOptimizer zero(zero_model->parameters(), world, sgd(), options());
  const auto [x, y] = rank_batch(3, N, r);
  cross_entropy(ddp.forward(Variable(x)), y).backward();
  cross_entropy(zero_model->forward(Variable(x)), y).backward();
  const double full = optim::clip_grad_norm(ddp_model->parameters(), 0.05);
  const double sharded = zero.clip_grad_norm(0.05);
  EXPECT_NEAR(sharded, full, 1e-9 * full);
  EXPECT_GT(full, 0.05);  // so the clipping did scale the gradients
  ddp_opt->step();
  zero.step();
  const auto a = ddp_model->parameters(), b = zero_model->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(max_abs_diff(a[i].data(), b[i].data()), 1e-9) << i;
}

// The generic clip on a ZeRO model's parameters would clip nothing (stage 2: the gradients live
// in the flat buckets) or clip by this rank's own norm (stage 1): it refuses, naming the call
// that clips them; once the optimizer is gone the parameters are ordinary again.
TEST_P(ZeroStage, GenericClipRefusesZerosParametersNamingItsOwnClip) {
  auto world = dist::world();
  auto model = mlp();
  {
    ZeroRedundancyOptimizer zero(model->parameters(), world, sgd(), options());
    const auto [x, y] = rank_batch(3, world->size(), world->rank());
    cross_entropy(model->forward(Variable(x)), y).backward();
    testing::expect_error([&] { optim::clip_grad_norm(model->parameters(), 0.05); },
                          "ZeroRedundancyOptimizer::clip_grad_norm(max_norm)");
  }
  EXPECT_NO_THROW(optim::clip_grad_norm(model->parameters(), 0.05));
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStage, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Stage" + std::to_string(info.param);
                         });

TEST(Zero2, GradientMemoryPerRankIsAboutOneNthMeasured) {
  // The allocator's bytes in use after backward, minus before: the gradients this rank holds.
  // Stage 1 keeps psi of them (the parameters' own); stage 2 its shard, psi / N.
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  int64_t held[3] = {0, 0, 0};
  int64_t shard = 0, psi = 0;
  for (int stage : {1, 2}) {
    auto model = mlp();
    psi = model->num_parameters();
    ZeroRedundancyOptimizer zero(model->parameters(), world, sgd(),
                                 ZeroOptions().stage(stage).bucket_cap_mb(0.01));
    shard = zero.shard_numel();
    const int64_t before = memory_stats(Device::cpu()).current_bytes;
    cross_entropy(model->forward(Variable(x)), y).backward();
    held[stage] = memory_stats(Device::cpu()).current_bytes - before;
    if (r == 0) {
      std::printf("ZeRO-%d gradient bytes on rank 0: measured %lld, formula %s = %lld\n", stage,
                  static_cast<long long>(held[stage]), stage == 1 ? "8 psi" : "8 psi / N",
                  static_cast<long long>(stage == 1 ? 8 * psi : 8 * shard));
    }
    for (const Variable& p : model->parameters()) EXPECT_EQ(p.grad().defined(), stage == 1);
  }
  EXPECT_EQ(held[1], 8 * psi);
  EXPECT_EQ(held[2], 8 * shard);
}

// Half-precision parameters loaded after the optimizer was built (a resume from a checkpoint
// without optimizer state) are what the first step starts from: the shard ZeRO steps is their
// master copy only once it has stepped or loaded a master of its own.
TEST_P(ZeroStage, HalfParametersLoadedAfterConstructionAreKept) {
  auto world = dist::world();
  manual_seed(3);
  auto model = models::MLP(12, 8, 4);
  model->to(kBF16);
  ZeroRedundancyOptimizer zero(
      model->parameters(), world,
      [](std::vector<Variable> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1)); },
      options());
  StateDict loaded;
  for (const auto& [name, t] : model->state_dict()) loaded.set(name, full(t.shape(), 0.5, kBF16));
  model->load_state_dict(loaded);
  zero.zero_grad();
  zero.step();  // no gradients: SGD without momentum or decay leaves every value as it is
  for (const auto& [name, t] : model->state_dict()) {
    EXPECT_EQ(max_abs_diff(t.to(kF32), full(t.shape(), 0.5)), 0.0) << name;
  }
}

TEST(ZeroAndDdp, OnTheSameParametersIsAnError) {
  auto world = dist::world();
  auto model = mlp();
  {
    DistributedDataParallel ddp(model, world);
    EXPECT_THROW(ZeroRedundancyOptimizer(model->parameters(), world, sgd(), ZeroOptions().stage(2)),
                 Error);
  }
  // Once the DDP wrapper is gone its claim is released.
  ZeroRedundancyOptimizer zero(model->parameters(), world, sgd());
  EXPECT_THROW(DistributedDataParallel(model, world), Error);
}

}  // namespace
}  // namespace dist
}  // namespace tessera
