// Loss scaling across ranks: an inf injected into one rank's gradients makes every rank skip
// the step (plain per-rank optimizers, DDP, ZeRO-1), the scale stays equal everywhere, and the
// parameters stay identical across ranks; without the reduction the ranks would disagree.
#include "dist/amp.h"

#include <gtest/gtest.h>

#include <limits>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/module_sync.h"
#include "dist/zero/zero_optimizer.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(11);
  return models::MLP(20, 16, 4);
}

// Each rank's own batch.
std::pair<Tensor, Tensor> batch(int step, int rank) {
  Generator g(100 * step + rank);
  const Tensor x = randn({8, 20}, kF32, &g);
  return {x, argmax(x.narrow(1, 0, 4), 1)};
}

// The loss under f16 autocast, scaled.
Variable scaled_loss(nn::Module& model, optim::GradScaler& scaler, int step, int rank) {
  const auto [x, y] = batch(step, rank);
  Variable loss;
  {
    AutocastGuard autocast(kF16);
    loss = cross_entropy(model.forward(Variable(x)), y);
  }
  return scaler.scale(loss);
}

// Writes inf into the first gradient, on `rank` only.
void poison_on(int rank, const std::vector<Variable>& params) {
  if (world()->rank() != rank) return;
  Tensor(params[0].grad()).fill_(kInf);
}

// Rank 0's values of every parameter against this rank's.
void expect_same_on_every_rank(const std::vector<Variable>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor root = params[i].data().clone();
    world()->broadcast(root, 0)->wait();
    EXPECT_TRUE(allclose(root, params[i].data(), 0, 0)) << "parameter " << i;
  }
}

std::vector<Tensor> snapshot(const std::vector<Variable>& params) {
  std::vector<Tensor> out;
  for (const Variable& p : params) out.push_back(p.data().clone());
  return out;
}

bool unchanged(const std::vector<Variable>& params, const std::vector<Tensor>& before) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!allclose(params[i].data(), before[i], 0, 0)) return false;
  }
  return true;
}

TEST(AmpDist, InfOnOneRankMakesEveryRankSkip) {
  auto model = mlp();
  const auto params = model->parameters();
  optim::SGD opt(params, optim::SGDOptions(0.1));
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024),
                           found_inf_all_reduce(world()));
  const int last = world()->size() - 1;
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    scaled_loss(*model, scaler, step, world()->rank()).backward();
    const auto before = snapshot(params);
    const bool poisoned = step == 2;
    if (poisoned) poison_on(last, params);
    EXPECT_EQ(scaler.step(opt), !poisoned) << "step " << step;
    scaler.update();
    EXPECT_EQ(unchanged(params, before), poisoned) << "step " << step;
  }
  EXPECT_EQ(scaler.get_scale(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

TEST(AmpDist, WithoutTheReductionRanksWouldDisagree) {
  if (world()->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto model = mlp();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  optim::GradScaler local_only(optim::GradScalerOptions().init_scale(1024));
  scaled_loss(*model, local_only, 0, world()->rank()).backward();
  poison_on(1, model->parameters());
  EXPECT_EQ(local_only.step(opt), world()->rank() != 1);
}

TEST(AmpDist, DdpRanksSkipTogetherAndStayIdentical) {
  auto model = mlp();
  DistributedDataParallel ddp(model, world());
  const auto params = model->parameters();
  optim::Adam opt(params, optim::AdamOptions(1e-2));
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024).growth_interval(2),
                           found_inf_all_reduce(world()));
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    scaled_loss(ddp, scaler, step, world()->rank()).backward();  // averaged across ranks
    const bool poisoned = step == 1 || step == 3;
    // After the all-reduce: only the reduction of found_inf can tell rank 0.
    if (poisoned) poison_on(world()->size() - 1, params);
    EXPECT_EQ(scaler.step(opt), !poisoned) << "step " << step;
    scaler.update();
  }
  EXPECT_EQ(opt.state_dict().at("state.0.step").item(), 3.0);
  EXPECT_EQ(scaler.skipped_steps(), 2);
  expect_same_on_every_rank(params);
}

TEST(AmpDist, ZeroRanksSkipTogetherAndStayIdentical) {
  for (int stage : {1, 2}) {
    auto model = mlp();
    const auto params = model->parameters();
    ZeroRedundancyOptimizer zero(params, world(),
                                 zero_factory<optim::Adam>(optim::AdamOptions(1e-2)),
                                 ZeroOptions().stage(stage));
    optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024),
                             found_inf_all_reduce(world()));
    for (int step = 0; step < 4; ++step) {
      zero.zero_grad();
      scaled_loss(*model, scaler, step, world()->rank()).backward();
      const auto before = snapshot(params);
      const bool poisoned = step == 2;
      // The gradients step() will read: stage 1 the local ones (unscaled before the
      // reduce-scatter: linear, so the same as after it), stage 2 this rank's reduced shard.
      if (poisoned) poison_on(world()->size() - 1, zero.gradient_variables());
      EXPECT_EQ(scaler.step(zero), !poisoned) << "stage " << stage << " step " << step;
      scaler.update();
      EXPECT_EQ(unchanged(params, before), poisoned) << "stage " << stage << " step " << step;
    }
    EXPECT_EQ(scaler.get_scale(), 512.0);
    expect_same_on_every_rank(params);
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
