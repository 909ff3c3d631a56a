// Local SGD (PeriodicModelAverager + PostLocalSGDOptimizer) on 2 and 3 ranks:
//  * period 1 with plain SGD equals DDP;
//  * period 4 (with momentum, BatchNorm buffers) equals the one-process simulation of N
//    replicas averaged every 4 steps, rank by rank, also mid-round;
//  * warm-up steps are DDP's steps, bit for bit, and add no communication;
//  * the byte ledger: one all-reduce of psi (+ buffer) elements per round, nothing between;
//  * one flat all-reduce per dtype; options and state checked with messages naming the values.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/local_sgd/periodic_model_averager.h"
#include "dist/local_sgd/post_local_sgd_optimizer.h"
#include "optim/sgd.h"
#include "tests/dist/local_sgd/local_sgd_reference.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace local_sgd_test {
namespace {

using testing::expect_error;

MakeOptimizer sgd(double lr, double momentum = 0) {
  return [lr, momentum](std::vector<Variable> p) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(lr).momentum(momentum));
  };
}

struct LocalRun {
  std::shared_ptr<nn::Sequential> model;
  std::vector<LedgerEntry> all_reduce;  // per step
  std::vector<int64_t> total_bytes;     // per step, every kind
  std::vector<bool> communicated;       // per step, as the optimizer reports it
};

// Post-local SGD as a user writes it: DDP's forward during warm-up, the model's afterwards.
LocalRun run_local_sgd(int steps, const PeriodicModelAveragerOptions& options,
                       const MakeOptimizer& make_opt,
                       const DDPOptions& ddp_options = DDPOptions()) {
  auto world = dist::world();
  LocalRun run;
  run.model = model();
  DistributedDataParallel ddp(run.model, world, ddp_options);
  PostLocalSGDOptimizer opt(make_opt(run.model->parameters()),
                            std::make_shared<PeriodicModelAverager>(world, options),
                            run.model->buffers());
  for (int k = 0; k < steps; ++k) {
    world->ledger().reset();
    opt.zero_grad();
    nn::Module& net = opt.in_warmup() ? static_cast<nn::Module&>(ddp) : *run.model;
    loss_of(net, k, world->rank()).backward();
    opt.step();
    run.all_reduce.push_back(world->ledger().entry(CollectiveKind::kAllReduce));
    run.total_bytes.push_back(world->ledger().total_bytes());
    run.communicated.push_back(opt.communicated());
  }
  return run;
}

// Plain DDP for `steps` steps.
LocalRun run_ddp(int steps, const MakeOptimizer& make_opt,
                 const DDPOptions& options = DDPOptions()) {
  auto world = dist::world();
  LocalRun run;
  run.model = model();
  DistributedDataParallel ddp(run.model, world, options);
  auto opt = make_opt(run.model->parameters());
  for (int k = 0; k < steps; ++k) {
    world->ledger().reset();
    opt->zero_grad();
    loss_of(ddp, k, world->rank()).backward();
    opt->step();
    run.all_reduce.push_back(world->ledger().entry(CollectiveKind::kAllReduce));
    run.total_bytes.push_back(world->ledger().total_bytes());
  }
  return run;
}

std::shared_ptr<PeriodicModelAverager> averager(int64_t period) {
  return std::make_shared<PeriodicModelAverager>(dist::world(),
                                                 PeriodicModelAveragerOptions(period));
}

double worst_over_ranks(double local) {
  Tensor t = scalar_tensor(local, kF64);
  dist::world()->all_reduce(t, ReduceOp::kMax)->wait();
  return t.item();
}

// Why H = 1 with plain SGD is DDP: SGD's update is linear in the gradient. From the same w,
//   mean_i (w - lr g_i) = w - lr mean_i g_i,
// and the right side is DDP's step with the all-reduced (mean) gradient. So averaging the
// models after every step gives DDP's model after every step, up to the rounding of the two
// orders of operations (f64 here). Momentum would break it: each rank's momentum buffer
// remembers its own gradients, which averaging the parameters does not average.
TEST(LocalSgd, PeriodOneWithPlainSgdEqualsDdp) {
  auto world = dist::world();
  constexpr int kSteps = 6;
  LocalRun ddp = run_ddp(kSteps, sgd(0.1));
  LocalRun local = run_local_sgd(kSteps, PeriodicModelAveragerOptions(1), sgd(0.1));
  // Parameters only: DDP keeps rank 0's BatchNorm statistics (broadcast_buffers), local SGD
  // their mean.
  const double diff =
      worst_over_ranks(largest_difference(*ddp.model, *local.model, /*buffers=*/false));
  if (world->rank() == 0) {
    std::printf("H = 1, plain SGD, %d steps on %d ranks: largest difference from DDP %.3g\n",
                kSteps, world->size(), diff);
  }
  EXPECT_LT(diff, 1e-12);
  for (int k = 0; k < kSteps; ++k) EXPECT_TRUE(local.communicated[k]) << k;
}

TEST(LocalSgd, PeriodFourEqualsOneProcessSimulationOfAveragedReplicas) {
  auto world = dist::world();
  constexpr int kSteps = 10;  // rounds end after steps 3 and 7; 8 and 9 are local
  Protocol p;
  p.period = 4;
  const Simulation sim = simulate(world->size(), kSteps, p, sgd(0.05, 0.9));
  LocalRun local = run_local_sgd(kSteps, PeriodicModelAveragerOptions(4), sgd(0.05, 0.9));
  const double diff =
      worst_over_ranks(largest_difference(*sim.replicas[world->rank()], *local.model));
  // The replicas really did drift apart after the last round (so the test sees local steps).
  const double drift = largest_difference(*sim.replicas[0], *sim.replicas[1]);
  if (world->rank() == 0) {
    std::printf("H = 4, SGD momentum 0.9, BatchNorm, %d steps on %d ranks: largest difference "
                "from the simulation %.3g (replicas 0 and 1 differ by %.3g)\n",
                kSteps, world->size(), diff, drift);
  }
  EXPECT_LT(diff, 1e-12);
  EXPECT_GT(drift, 1e-4);
  for (int k = 0; k < kSteps; ++k) EXPECT_EQ(local.communicated[k], k == 3 || k == 7) << k;
}

TEST(LocalSgd, WarmupStepsAreDdpStepsExactly) {
  auto world = dist::world();
  constexpr int kWarmup = 3;
  const MakeOptimizer opt = sgd(0.05, 0.9);
  LocalRun ddp = run_ddp(kWarmup, opt);
  LocalRun local =
      run_local_sgd(kWarmup, PeriodicModelAveragerOptions(2).warmup_steps(kWarmup), opt);
  EXPECT_EQ(worst_over_ranks(largest_difference(*ddp.model, *local.model)), 0.0);
  // And the averager added nothing to DDP's communication: the same all-reduces and bytes as a
  // DDP step (its bucket all-reduce and its buffer broadcasts).
  for (int k = 0; k < kWarmup; ++k) {
    EXPECT_FALSE(local.communicated[k]);
    EXPECT_GE(ddp.all_reduce[k].calls, 1);
    EXPECT_EQ(local.all_reduce[k].calls, ddp.all_reduce[k].calls);
    EXPECT_EQ(local.total_bytes[k], ddp.total_bytes[k]);
  }

  // After warm-up (W = 3, H = 2): local steps 3 and 4, averaged after 4. Against the simulation
  // (DDP without buffer broadcasts, so each replica's statistics are its own, as simulated).
  constexpr int kSteps = 8;
  Protocol p;
  p.period = 2;
  p.warmup = kWarmup;
  const Simulation sim = simulate(world->size(), kSteps, p, opt);
  LocalRun post = run_local_sgd(kSteps, PeriodicModelAveragerOptions(2).warmup_steps(kWarmup),
                                opt, DDPOptions().broadcast_buffers(false));
  const double diff =
      worst_over_ranks(largest_difference(*sim.replicas[world->rank()], *post.model));
  if (world->rank() == 0) {
    std::printf("post-local SGD (W = 3, H = 2), %d steps on %d ranks: largest difference from the "
                "simulation %.3g\n", kSteps, world->size(), diff);
  }
  EXPECT_LT(diff, 1e-12);
  for (int k = 0; k < kSteps; ++k) EXPECT_EQ(post.communicated[k], k == 4 || k == 6) << k;
}

TEST(LocalSgd, LedgerHoldsOneAllReduceOfPsiElementsPerRoundAndNothingBetween) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  constexpr int kSteps = 9, kPeriod = 3;
  LocalRun local = run_local_sgd(kSteps, PeriodicModelAveragerOptions(kPeriod), sgd(0.1));
  // psi: the parameters, plus BatchNorm's f64 running mean and variance (the i64 counter stays).
  int64_t psi = 0;
  for (const Variable& p : local.model->parameters()) psi += p.numel();
  const int64_t averaged = psi + 2 * kChannels;
  const int64_t expected = ring_all_reduce_bytes(averaged, 8, r, N);
  if (r == 0) {
    std::printf("H = %d on %d ranks: psi = %lld parameters + %lld buffer elements; rank 0 sends "
                "%lld bytes per round (ring: 2 (N-1)/N x %lld B), 0 between\n", kPeriod, N,
                static_cast<long long>(psi), static_cast<long long>(2 * kChannels),
                static_cast<long long>(expected), static_cast<long long>(averaged * 8));
  }
  for (int k = 0; k < kSteps; ++k) {
    const bool round_end = (k + 1) % kPeriod == 0;
    EXPECT_EQ(local.all_reduce[k].calls, round_end ? 1 : 0) << k;
    EXPECT_EQ(local.all_reduce[k].bytes, round_end ? expected : 0) << k;
    EXPECT_EQ(local.total_bytes[k], round_end ? expected : 0) << k;
  }

  // Measuring the consensus distance adds one all-reduce of one f64.
  LocalRun measured = run_local_sgd(
      kSteps, PeriodicModelAveragerOptions(kPeriod).measure_consensus_distance(true), sgd(0.1));
  for (int k = 0; k < kSteps; ++k) {
    const bool round_end = (k + 1) % kPeriod == 0;
    EXPECT_EQ(measured.all_reduce[k].calls, round_end ? 2 : 0) << k;
    EXPECT_EQ(measured.all_reduce[k].bytes,
              round_end ? expected + ring_all_reduce_bytes(1, 8, r, N) : 0) << k;
  }
}

TEST(LocalSgd, AverageParametersUsesOneFlatAllReducePerDtype) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  // Rank r holds value (r + 1) * (i + 1) in tensor i; integers are left alone.
  auto filled = [&](const Shape& s, DType d, int i) {
    return Variable(full(s, (r + 1) * (i + 1.0), d), is_floating(d));
  };
  const std::vector<Variable> params = {filled({3}, kF32, 0), filled({2, 2}, kF64, 1),
                                        filled({5}, kF32, 2)};
  const std::vector<Variable> buffers = {filled({2}, kI64, 3), filled({1}, kF64, 4)};
  world->ledger().reset();
  average_parameters(params, buffers, *world);
  const LedgerEntry e = world->ledger().entry(CollectiveKind::kAllReduce);
  EXPECT_EQ(e.calls, 2);  // f32: 3 + 5 elements; f64: 4 + 1
  EXPECT_EQ(e.bytes, ring_all_reduce_bytes(8, 4, r, N) + ring_all_reduce_bytes(5, 8, r, N));
  const double mean_rank = (N + 1) / 2.0;  // mean of r + 1
  for (int i = 0; i < 3; ++i) {
    const Tensor expected = full(params[i].shape(), mean_rank * (i + 1), kF64);
    EXPECT_EQ(max_abs_diff(params[i].data().to(kF64), expected), 0) << i;
  }
  EXPECT_EQ(max_abs_diff(buffers[0].data().to(kF64), full({2}, (r + 1) * 4.0, kF64)), 0);
  EXPECT_EQ(max_abs_diff(buffers[1].data(), full({1}, mean_rank * 5, kF64)), 0);
}

TEST(LocalSgd, GroupOptionsSetOnTheWrapperReachTheInnerOptimizer) {
  auto world = dist::world();
  auto m = model();
  PostLocalSGDOptimizer opt(sgd(0.1)(m->parameters()), averager(2), m->buffers());
  const Tensor before = m->parameters()[0].data().clone();
  opt.param_groups()[0].options->set_lr(0);  // what an LR scheduler does
  opt.zero_grad();
  loss_of(*m, 0, world->rank()).backward();
  opt.step();
  EXPECT_EQ(max_abs_diff(before, m->parameters()[0].data()), 0);
  EXPECT_EQ(opt.inner().param_groups()[0].options->lr(), 0);
  // The state: the inner optimizer's entries, this optimizer's options, the averager's step.
  const StateDict state = opt.state_dict();
  EXPECT_EQ(state.at("averager.step").item(), 1);
  EXPECT_EQ(state.at("param_groups.0.lr").item(), 0);
}

TEST(LocalSgd, StateDictResumesMidRound) {
  auto world = dist::world();
  constexpr int kSteps = 10, kStop = 5;  // H = 4: the rounds end after 3 and 7
  const MakeOptimizer make_opt = sgd(0.05, 0.9);
  LocalRun straight = run_local_sgd(kSteps, PeriodicModelAveragerOptions(4), make_opt);
  auto run_part = [&](nn::Sequential& m, PostLocalSGDOptimizer& opt, int from, int to) {
    for (int k = from; k < to; ++k) {
      opt.zero_grad();
      loss_of(m, k, world->rank()).backward();
      opt.step();
    }
  };
  StateDict model_state, opt_state;
  {
    auto m = model();
    PostLocalSGDOptimizer opt(make_opt(m->parameters()), averager(4), m->buffers());
    run_part(*m, opt, 0, kStop);
    for (const auto& [k, t] : m->state_dict()) model_state.set(k, t.clone());
    for (const auto& [k, t] : opt.state_dict()) opt_state.set(k, t.clone());
  }
  auto m = model();
  PostLocalSGDOptimizer opt(make_opt(m->parameters()), averager(4), m->buffers());
  m->load_state_dict(model_state);
  opt.load_state_dict(opt_state);
  EXPECT_EQ(opt.averager().step(), kStop);
  run_part(*m, opt, kStop, kSteps);
  EXPECT_EQ(worst_over_ranks(largest_difference(*straight.model, *m)), 0.0);
}

TEST(LocalSgd, BadOptionsAndStateAreNamed) {
  auto world = dist::world();
  expect_error([&] { PeriodicModelAverager(world, PeriodicModelAveragerOptions(0)); },
               "PeriodicModelAverager: period (H, local steps per round) must be >= 1, got 0");
  expect_error([&] {
    PeriodicModelAverager(world, PeriodicModelAveragerOptions(2).warmup_steps(-3));
  },
               "PeriodicModelAverager: warmup_steps must be >= 0, got -3");
  expect_error([&] { PeriodicModelAverager(nullptr, PeriodicModelAveragerOptions(2)); },
               "PeriodicModelAverager: the process group is null");
  expect_error([] { communicates_after(5, -1, 0); }, "period must be >= 1, got -1");
  auto m = model();
  auto averager = std::make_shared<PeriodicModelAverager>(world, PeriodicModelAveragerOptions(2));
  expect_error([&] { PostLocalSGDOptimizer(nullptr, averager); },
               "PostLocalSGDOptimizer: the inner optimizer is null");
  expect_error([&] { PostLocalSGDOptimizer(sgd(0.1)(m->parameters()), nullptr); },
               "PostLocalSGDOptimizer: the model averager is null");
  PostLocalSGDOptimizer opt(sgd(0.1)(m->parameters()), averager, m->buffers());
  expect_error([&] { opt.add_param_group(optim::ParamGroup({Variable(zeros({1}), true)})); },
               "add_param_group is not supported");
  StateDict state = opt.state_dict();
  state.erase("averager.step");
  expect_error([&] { opt.load_state_dict(state); }, "missing 'averager.step'");
  state.set("averager.step", scalar_tensor(-2, kI64));
  expect_error([&] { opt.load_state_dict(state); }, "'step' is -2, expected a step count >= 0");
  state.set("averager.step", scalar_tensor(2, kI64));
  state.set("averager.global.0", zeros({1}));
  expect_error([&] { opt.load_state_dict(state); },
               "PeriodicModelAverager::load_state_dict: unexpected key 'global.0'");
}

}  // namespace
}  // namespace local_sgd_test
}  // namespace dist
}  // namespace tessera
