// What tests/dist/zero/fully_sharded_test.cc and fully_sharded_memory_test.cc share: the f64 MLP
// whose units are its first and third children, each rank's batch, the optimizers, and the run
// of FullyShardedDataParallel beside DDP for 5 steps compared at the end.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace fsdp_test {

constexpr int64_t kPerRank = 5;

// Children 0 (64x63+63 = 4095 parameters, odd: padded on 2 and 4 ranks) and 2 (3904) are units
// under min_num_params(1000); child 4 (620) is the root unit.
inline std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(23);
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(64, 63), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(63, 61), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(61, 10)});
  m->to(kF64);
  return m;
}

inline FullyShardedOptions options() { return FullyShardedOptions().min_num_params(1000); }

inline std::pair<Tensor, Tensor> rank_batch(int step, int world, int rank) {
  Generator g(700 + step);
  const Tensor x = randn({kPerRank * world, 64}, kF64, &g);
  const Tensor y = arange(kPerRank * world, kI64);
  const Tensor labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);
  return {x.narrow(0, rank * kPerRank, kPerRank), labels.narrow(0, rank * kPerRank, kPerRank)};
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable>)>;

inline MakeOpt adam() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3));
  };
}
inline MakeOpt sgd() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  };
}

inline void expect_equal_states(const StateDict& a, const StateDict& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    ASSERT_EQ(b.at(name).shape(), t.shape()) << name;
    EXPECT_LT(max_abs_diff(b.at(name), t), tolerance) << name;
  }
}

// `micro` backward calls per step, 5 steps; returns after comparing with DDP.
inline void fsdp_matches_ddp(const MakeOpt& make, int micro,
                             const FullyShardedOptions& fsdp_options = options()) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = make(ddp_model->parameters());
  FullyShardedDataParallel fsdp(mlp(), world, fsdp_options);
  auto fsdp_opt = make(fsdp.shard_parameters());
  for (int step = 0; step < 5; ++step) {
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    for (int m = 0; m < micro; ++m) {
      const auto [x, y] = rank_batch(10 * step + m, N, r);
      cross_entropy(ddp.forward(Variable(x)), y).backward();
      cross_entropy(fsdp.forward(Variable(x)), y).backward();
    }
    ddp_opt->step();
    fsdp_opt->step();
  }
  expect_equal_states(ddp_model->state_dict(), fsdp.state_dict(), 1e-6);
}

}  // namespace fsdp_test
}  // namespace dist
}  // namespace tessera
