// The servers' optimizer state in the unsplit model's format (dist/async/server_state.h), no
// MPI: the picture's layout (w [2, 3], b [3] over 2 servers of 5 and 4 elements) written out
// element by element; a round trip; Adam stepped on the two shards gives, unsplit, exactly the
// state of Adam stepped on the whole model (the format one process and DDP checkpoint); and the
// errors name what does not fit.
#include "dist/async/server_state.h"

#include <gtest/gtest.h>

#include "optim/adam.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

using testing::expect_error;

std::vector<Variable> model_params() {
  Variable w(zeros({2, 3}, kF64), true), b(zeros({3}, kF64), true);
  w.set_name("w");
  b.set_name("b");
  return {w, b};
}

// 3 ranks, 2 servers: shards of 5 and 4 of the 9 elements.
ParameterServerLayout two_servers() { return ParameterServerLayout(3, AsyncOptions().servers(2), 9); }

Tensor f64(std::vector<double> v, Shape shape) {
  return from_vector<double>(v, shape, TensorOptions(kF64));
}

std::vector<StateDict> server_states() {
  StateDict s0, s1;
  s0.set("param_groups.0.lr", scalar_tensor(0.05, kF64));
  s0.set("state.0.step", scalar_tensor(6, kI64));
  s0.set("state.0.exp_avg", f64({0, 1, 2, 3, 4}, {5}));
  s1.set("param_groups.0.lr", scalar_tensor(0.05, kF64));
  s1.set("state.0.step", scalar_tensor(6, kI64));
  s1.set("state.0.exp_avg", f64({5, 6, 7, 8}, {4}));
  return {s0, s1};
}

TEST(ServerState, TheServersShardsLaidEndToEndAreCutByTheParametersShapes) {
  const ParameterServerLayout layout = two_servers();
  ASSERT_EQ(layout.shard_numel(0), 5);
  const StateDict full = unsplit_optimizer_state(server_states(), layout, model_params());
  ASSERT_EQ(full.size(), 4u);  // the servers' learning rate (lr / W) is not the model's
  EXPECT_EQ(full.at("state.0.step").item(), 6);
  EXPECT_EQ(full.at("state.1.step").item(), 6);
  EXPECT_EQ(full.at("state.0.step").dtype(), kI64);
  EXPECT_EQ(max_abs_diff(full.at("state.0.exp_avg"), f64({0, 1, 2, 3, 4, 5}, {2, 3})), 0);
  EXPECT_EQ(max_abs_diff(full.at("state.1.exp_avg"), f64({6, 7, 8}, {3})), 0);

  // And back: each server's own elements, the options kept.
  StateDict with_options = full;
  with_options.set("param_groups.0.lr", scalar_tensor(0.1, kF64));
  for (int s = 0; s < 2; ++s) {
    const StateDict shard = shard_optimizer_state(with_options, layout, s, model_params());
    ASSERT_EQ(shard.size(), 3u);
    EXPECT_EQ(shard.at("param_groups.0.lr").item(), 0.1);
    EXPECT_EQ(shard.at("state.0.step").item(), 6);
    EXPECT_EQ(max_abs_diff(shard.at("state.0.exp_avg"), server_states()[s].at("state.0.exp_avg")), 0)
        << "server " << s;
  }
  // Nothing stepped yet: nothing to cut, nothing to load but the options.
  EXPECT_TRUE(unsplit_optimizer_state({StateDict(), StateDict()}, layout, model_params()).empty());
}

TEST(ServerState, AdamOnTheShardsIsAdamOnTheWholeModel) {
  const ParameterServerLayout layout = two_servers();
  const std::vector<Variable> params = model_params();
  optim::Adam whole(params, optim::AdamOptions(0.01));
  std::vector<Variable> shards = {Variable(zeros({5}, kF64), true), Variable(zeros({4}, kF64), true)};
  optim::Adam a0({shards[0]}, optim::AdamOptions(0.01)), a1({shards[1]}, optim::AdamOptions(0.01));
  for (int t = 0; t < 3; ++t) {
    const Tensor g = f64({1, -2, 3, -4, 5, -6, 7, -8, 9}, {9});
    const Tensor grad = mul(g, t + 1.0);
    params[0].set_grad(grad.narrow(0, 0, 6).view({2, 3}).clone());
    params[1].set_grad(grad.narrow(0, 6, 3).clone());
    whole.step();
    shards[0].set_grad(grad.narrow(0, 0, 5).clone());
    shards[1].set_grad(grad.narrow(0, 5, 4).clone());
    a0.step();
    a1.step();
  }
  const StateDict full = unsplit_optimizer_state({a0.state_dict(), a1.state_dict()}, layout, params);
  StateDict want;
  for (const auto& [key, t] : whole.state_dict()) {
    if (key.rfind("state.", 0) == 0) want.set(key, t);
  }
  ASSERT_EQ(full.size(), want.size());
  for (const auto& [key, t] : want) {
    ASSERT_TRUE(full.contains(key)) << key;
    EXPECT_EQ(full.at(key).shape(), t.shape()) << key;
    EXPECT_EQ(max_abs_diff(full.at(key).to(kF64), t.to(kF64)), 0) << key;
  }
  // And a whole model's Adam state loads into the shards' optimizers.
  optim::Adam b1({shards[1]}, optim::AdamOptions(0.01));
  b1.load_state_dict(shard_optimizer_state(whole.state_dict(), layout, 1, params));
  EXPECT_EQ(max_abs_diff(b1.state_dict().at("state.0.exp_avg_sq"),
                         a1.state_dict().at("state.0.exp_avg_sq")), 0);
}

TEST(ServerState, WhatDoesNotFitIsNamed) {
  const ParameterServerLayout layout = two_servers();
  StateDict full = unsplit_optimizer_state(server_states(), layout, model_params());
  StateDict steps = full;
  steps.set("state.1.step", scalar_tensor(5, kI64));
  expect_error([&] { shard_optimizer_state(steps, layout, 0, model_params()); },
               "parameter 1 (b) has step count 5, parameter 0 6");
  StateDict shapes = full;
  shapes.set("state.1.exp_avg", zeros({4}, kF64));
  expect_error([&] { shard_optimizer_state(shapes, layout, 0, model_params()); },
               "'state.1.exp_avg' has shape [4] but parameter 1 (b) has [3]");
  StateDict extra = full;
  extra.set("state.2.step", scalar_tensor(6, kI64));
  expect_error([&] { shard_optimizer_state(extra, layout, 0, model_params()); },
               "a parameter index in [0, 2)");
  std::vector<StateDict> servers = server_states();
  servers[1].set("state.0.step", scalar_tensor(4, kI64));
  expect_error([&] { unsplit_optimizer_state(servers, layout, model_params()); },
               "server 1 has step count 4, server 0 6");
}

}  // namespace
}  // namespace dist
}  // namespace tessera
