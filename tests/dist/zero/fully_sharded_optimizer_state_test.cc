// ZeRO-3's optimizer state in the unsplit model's format (dist/zero/fully_sharded_optimizer_state.h)
// on 2, 3 and 4 ranks (the first unit padded on 2 and 4): after 5 steps it equals DDP's optimizer
// state (keys, shapes, values to f64 rounding), and loaded into a fresh FSDP it is gathered back
// bit for bit and the two continue identically.
#include <gtest/gtest.h>

#include "dist/zero/fully_sharded_optimizer_state.h"
#include "tests/dist/zero/fully_sharded_fixtures.h"

namespace tessera {
namespace dist {
namespace fsdp_test {
namespace {

void expect_same_states(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    ASSERT_EQ(b.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(max_abs_diff(b.at(name).to(kF64), t.to(kF64)), 0.0) << name;
  }
}

void step_both(DistributedDataParallel* ddp, optim::Optimizer* ddp_opt,
               FullyShardedDataParallel& fsdp, optim::Optimizer& fsdp_opt, int step) {
  auto world = dist::world();
  const auto [x, y] = rank_batch(step, world->size(), world->rank());
  if (ddp != nullptr) {
    ddp_opt->zero_grad();
    cross_entropy(ddp->forward(Variable(x)), y).backward();
    ddp_opt->step();
  }
  fsdp_opt.zero_grad();
  cross_entropy(fsdp.forward(Variable(x)), y).backward();
  fsdp_opt.step();
}

void gathers_as_ddp_and_round_trips(const MakeOpt& make) {
  auto world = dist::world();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = make(ddp_model->parameters());
  FullyShardedDataParallel fsdp(mlp(), world, options());
  auto opt = make(fsdp.shard_parameters());
  for (int step = 0; step < 5; ++step) step_both(&ddp, ddp_opt.get(), fsdp, *opt, step);
  const StateDict gathered = zero::gather_optimizer_state(fsdp, *opt);
  expect_equal_states(ddp_opt->state_dict(), gathered, 1e-6);

  // A fresh run takes the model and then the optimizer state (not stepped: no state of its own).
  FullyShardedDataParallel fresh(mlp(), world, options());
  auto fresh_opt = make(fresh.shard_parameters());
  fresh.load_state_dict(fsdp.state_dict());
  zero::load_optimizer_state(gathered, fresh, *fresh_opt);
  expect_same_states(gathered, zero::gather_optimizer_state(fresh, *fresh_opt));
  for (int step = 5; step < 7; ++step) {
    step_both(nullptr, nullptr, fsdp, *opt, step);
    step_both(nullptr, nullptr, fresh, *fresh_opt, step);
  }
  expect_same_states(fsdp.state_dict(), fresh.state_dict());
  expect_same_states(zero::gather_optimizer_state(fsdp, *opt),
                     zero::gather_optimizer_state(fresh, *fresh_opt));
}

TEST(FullyShardedOptimizerState, AdamGathersAsDdpsAndRoundTrips) {
  gathers_as_ddp_and_round_trips(adam());
}
TEST(FullyShardedOptimizerState, SgdMomentumGathersAsDdpsAndRoundTrips) {
  gathers_as_ddp_and_round_trips(sgd());
}

}  // namespace
}  // namespace fsdp_test
}  // namespace dist
}  // namespace tessera
