// DiLoCo on 2 and 3 ranks:
//  * the sign convention: outer SGD with lr 1 and no momentum is local SGD with period H
//    (theta - mean(theta - theta_i) = mean theta_i);
//  * with the paper's outer Nesterov SGD (lr 0.7, momentum 0.9) and a DDP warm-up, every rank's
//    model and the global copy equal the one-process simulation, mid-round too;
//  * the state (global copy, outer optimizer, step) resumes a run exactly, mid-round;
//  * the byte ledger: one all-reduce of psi (+ buffer) elements per round, nothing between;
//  * bad options and misuse are named.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/local_sgd/diloco.h"
#include "dist/local_sgd/periodic_model_averager.h"
#include "dist/local_sgd/post_local_sgd_optimizer.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/dist/local_sgd/local_sgd_reference.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace local_sgd_test {
namespace {

using testing::expect_error;

std::unique_ptr<optim::Optimizer> inner_sgd(std::vector<Variable> p) {
  return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9));
}

OuterOptimizerFactory outer_sgd(double lr, double momentum, bool nesterov) {
  return [=](std::vector<Variable> g) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(
        std::move(g), optim::SGDOptions(lr).momentum(momentum).nesterov(nesterov));
  };
}

struct Trained {
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<DiLoCo> diloco;  // null for local SGD
  std::vector<LedgerEntry> all_reduce;
  std::vector<int64_t> total_bytes;
  std::vector<bool> communicated;
};

// DiLoCo (or, with `outer` empty, local SGD) as a user writes it: DDP's forward for the
// warm-up steps, the model's afterwards.
Trained train(int steps, int64_t period, int64_t warmup, const OuterOptimizerFactory& outer) {
  auto world = dist::world();
  Trained out;
  out.model = model();
  DistributedDataParallel ddp(out.model, world, DDPOptions().broadcast_buffers(false));
  std::shared_ptr<ModelAverager> averager;
  if (outer) {
    out.diloco = std::make_shared<DiLoCo>(out.model->parameters(), out.model->buffers(), world,
                                          outer, DiLoCoOptions(period).warmup_steps(warmup));
    averager = out.diloco;
  } else {
    averager = std::make_shared<PeriodicModelAverager>(
        world, PeriodicModelAveragerOptions(period).warmup_steps(warmup));
  }
  PostLocalSGDOptimizer opt(inner_sgd(out.model->parameters()), averager, out.model->buffers());
  for (int k = 0; k < steps; ++k) {
    world->ledger().reset();
    opt.zero_grad();
    nn::Module& net = opt.in_warmup() ? static_cast<nn::Module&>(ddp) : *out.model;
    loss_of(net, k, world->rank()).backward();
    opt.step();
    out.all_reduce.push_back(world->ledger().entry(CollectiveKind::kAllReduce));
    out.total_bytes.push_back(world->ledger().total_bytes());
    out.communicated.push_back(opt.communicated());
  }
  return out;
}

double worst_over_ranks(double local) {
  Tensor t = scalar_tensor(local, kF64);
  dist::world()->all_reduce(t, ReduceOp::kMax)->wait();
  return t.item();
}

double tensors_difference(const std::vector<Variable>& a, const std::vector<Variable>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, max_abs_diff(a[i].data(), b[i].data()));
  }
  return worst;
}

// The sign convention, Delta = theta_global - theta_local: outer SGD with lr 1, no momentum,
// steps theta - 1 * mean_i(theta - theta_i) = mean_i theta_i, the replicas' average. So DiLoCo
// with it is local SGD with period H, step for step (up to the rounding of theta - (theta -
// theta_i)); a flipped sign would step to 2 theta - mean theta_i and fail at once.
TEST(DiLoCo, OuterSgdWithLrOneAndNoMomentumIsLocalSgd) {
  auto world = dist::world();
  constexpr int kSteps = 11;  // W = 2, H = 3: rounds end after 4, 7, 10
  Trained diloco = train(kSteps, 3, 2, outer_sgd(1.0, 0.0, false));
  Trained local = train(kSteps, 3, 2, nullptr);
  const double diff = worst_over_ranks(largest_difference(*diloco.model, *local.model));
  // After a round every rank's model is the global one.
  const double global = worst_over_ranks(
      tensors_difference(diloco.diloco->global_parameters(), diloco.model->parameters()));
  if (world->rank() == 0) {
    std::printf("DiLoCo, outer SGD lr 1 momentum 0, H = 3, W = 2, %d steps on %d ranks: largest "
                "difference from local SGD %.3g\n", kSteps, world->size(), diff);
  }
  EXPECT_LT(diff, 1e-12);
  EXPECT_EQ(global, 0.0);
  for (int k = 0; k < kSteps; ++k) {
    EXPECT_EQ(diloco.communicated[k], k == 4 || k == 7 || k == 10) << k;
    EXPECT_EQ(local.communicated[k], diloco.communicated[k]) << k;
  }
}

TEST(DiLoCo, NesterovOuterOptimizerEqualsOneProcessSimulation) {
  auto world = dist::world();
  constexpr int kSteps = 12;  // rounds end after 4, 7, 10; step 11 is local
  Protocol p;
  p.period = 3;
  p.warmup = 2;
  p.diloco = true;
  p.outer = nesterov_outer_optimizer(0.7, 0.9);
  const Simulation sim = simulate(world->size(), kSteps, p, inner_sgd);
  Trained diloco = train(kSteps, 3, 2, nesterov_outer_optimizer(0.7, 0.9));
  const double diff =
      worst_over_ranks(largest_difference(*sim.replicas[world->rank()], *diloco.model));
  const double global =
      worst_over_ranks(tensors_difference(sim.global, diloco.diloco->global_parameters()));
  // The outer step is not plain averaging: the global model differs from the local SGD one.
  Trained local = train(kSteps, 3, 2, nullptr);
  const double from_averaging = largest_difference(*local.model, *diloco.model);
  if (world->rank() == 0) {
    std::printf("DiLoCo, outer Nesterov lr 0.7 momentum 0.9, H = 3, W = 2, %d steps on %d ranks: "
                "largest difference from the simulation %.3g (model), %.3g (global copy); "
                "from plain averaging %.3g\n", kSteps, world->size(), diff, global, from_averaging);
  }
  EXPECT_LT(diff, 1e-12);
  EXPECT_LT(global, 1e-12);
  EXPECT_GT(from_averaging, 1e-3);
  EXPECT_GT(diloco.diloco->state_bytes(), 0);
}

TEST(DiLoCo, StateDictResumesExactlyMidRound) {
  auto world = dist::world();
  constexpr int kSteps = 12, kStop = 6;  // W = 2, H = 3: step 5 done, 6 and 7 left in the round
  const OuterOptimizerFactory outer = nesterov_outer_optimizer(0.7, 0.9);
  Trained straight = train(kSteps, 3, 2, outer);

  // The same run, stopped after kStop steps: the model's and the optimizer's state.
  StateDict model_state, opt_state;
  {
    auto m = model();
    DistributedDataParallel ddp(m, world, DDPOptions().broadcast_buffers(false));
    auto diloco = std::make_shared<DiLoCo>(m->parameters(), m->buffers(), world, outer,
                                           DiLoCoOptions(3).warmup_steps(2));
    PostLocalSGDOptimizer opt(inner_sgd(m->parameters()), diloco, m->buffers());
    for (int k = 0; k < kStop; ++k) {
      opt.zero_grad();
      nn::Module& net = opt.in_warmup() ? static_cast<nn::Module&>(ddp) : *m;
      loss_of(net, k, world->rank()).backward();
      opt.step();
    }
    for (const auto& [k, t] : m->state_dict()) model_state.set(k, t.clone());
    for (const auto& [k, t] : opt.state_dict()) opt_state.set(k, t.clone());
    EXPECT_EQ(opt.state_bytes(), opt.inner().state_bytes() + diloco->state_bytes());
  }
  EXPECT_EQ(opt_state.at("averager.step").item(), kStop);
  for (const char* key : {"averager.global.0", "averager.outer.param_groups.0.lr",
                          "averager.outer.state.0.momentum_buffer", "param_groups.0.lr",
                          "state.0.momentum_buffer"}) {
    EXPECT_TRUE(opt_state.contains(key)) << key;
  }
  EXPECT_EQ(opt_state.at("averager.outer.param_groups.0.lr").item(), 0.7);

  // A fresh process's objects (rank 0's initial model broadcast again), then the state.
  auto m = model();
  auto diloco = std::make_shared<DiLoCo>(m->parameters(), m->buffers(), world, outer,
                                         DiLoCoOptions(3).warmup_steps(2));
  PostLocalSGDOptimizer opt(inner_sgd(m->parameters()), diloco, m->buffers());
  m->load_state_dict(model_state);
  opt.load_state_dict(opt_state);
  EXPECT_FALSE(opt.in_warmup());
  for (int k = kStop; k < kSteps; ++k) {
    opt.zero_grad();
    loss_of(*m, k, world->rank()).backward();
    opt.step();
  }
  EXPECT_EQ(worst_over_ranks(largest_difference(*straight.model, *m)), 0.0);
  EXPECT_EQ(worst_over_ranks(tensors_difference(straight.diloco->global_parameters(),
                                                diloco->global_parameters())), 0.0);
}

TEST(DiLoCo, LedgerHoldsOneAllReducePerRoundAndNothingBetween) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  constexpr int kSteps = 9;
  Trained diloco = train(kSteps, 3, 0, nesterov_outer_optimizer());
  int64_t psi = 0;
  for (const Variable& p : diloco.model->parameters()) psi += p.numel();
  const int64_t expected = ring_all_reduce_bytes(psi + 2 * kChannels, 8, r, N);
  for (int k = 0; k < kSteps; ++k) {
    const bool round_end = (k + 1) % 3 == 0;
    EXPECT_EQ(diloco.communicated[k], round_end) << k;
    EXPECT_EQ(diloco.all_reduce[k].calls, round_end ? 1 : 0) << k;
    EXPECT_EQ(diloco.all_reduce[k].bytes, round_end ? expected : 0) << k;
    EXPECT_EQ(diloco.total_bytes[k], round_end ? expected : 0) << k;
  }
}

TEST(DiLoCo, AnyOptimizerCanBeTheOuterOne) {
  // Adam as the outer optimizer: its state is checkpointed like SGD's.
  auto world = dist::world();
  auto m = model();
  auto diloco = std::make_shared<DiLoCo>(
      m->parameters(), m->buffers(), world,
      [](std::vector<Variable> g) -> std::unique_ptr<optim::Optimizer> {
        return std::make_unique<optim::Adam>(std::move(g), optim::AdamOptions(1e-2));
      },
      DiLoCoOptions(2));
  PostLocalSGDOptimizer opt(inner_sgd(m->parameters()), diloco, m->buffers());
  for (int k = 0; k < 4; ++k) {
    opt.zero_grad();
    loss_of(*m, k, world->rank()).backward();
    opt.step();
  }
  const StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("averager.outer.state.0.step").item(), 2);
  EXPECT_TRUE(state.contains("averager.outer.state.0.exp_avg"));
  EXPECT_EQ(
      worst_over_ranks(tensors_difference(diloco->global_parameters(), m->parameters())), 0.0);
}

TEST(DiLoCo, BadOptionsAndMisuseAreNamed) {
  auto world = dist::world();
  auto m = model();
  const auto outer = nesterov_outer_optimizer();
  expect_error([&] { DiLoCo(m->parameters(), m->buffers(), world, outer, DiLoCoOptions(0)); },
               "DiLoCo: inner_steps (H, local steps per round) must be >= 1, got 0");
  expect_error([&] { DiLoCo(m->parameters(), m->buffers(), world, outer,
                            DiLoCoOptions(4).warmup_steps(-1)); },
               "DiLoCo: warmup_steps must be >= 0, got -1");
  expect_error([&] { DiLoCo(m->parameters(), m->buffers(), world, nullptr, DiLoCoOptions(4)); },
               "DiLoCo: the outer optimizer factory is empty");
  expect_error([&] { DiLoCo({}, {}, world, outer, DiLoCoOptions(4)); },
               "DiLoCo: got an empty parameter list");
  expect_error([] { nesterov_outer_optimizer(0.7, -0.5); }, "-0.5");
  DiLoCo diloco(m->parameters(), m->buffers(), world, outer, DiLoCoOptions(4));
  auto other = model();
  expect_error([&] { diloco.average(other->parameters(), other->buffers()); },
               "DiLoCo::average: parameter 0 (weight) is not the Variable DiLoCo was "
               "constructed with");
  expect_error([&] { diloco.average(m->parameters()); },
               "DiLoCo::average: got 6 parameters and 0 buffers, constructed with 6 and 3");
  StateDict state = diloco.state_dict();
  state.set("global.1", zeros({7}, kF64));
  expect_error([&] { diloco.load_state_dict(state); },
               "DiLoCo::load_state_dict: 'global.1' is f64[7], parameter 1 (bias) is f64[2]");
  state = diloco.state_dict();
  state.erase("global.2");
  expect_error([&] { diloco.load_state_dict(state); }, "missing 'global.2'");
  state = diloco.state_dict();
  state.set("global.9", zeros({1}));
  expect_error([&] { diloco.load_state_dict(state); }, "unexpected key 'global.9'");
}

}  // namespace
}  // namespace local_sgd_test
}  // namespace dist
}  // namespace tessera
