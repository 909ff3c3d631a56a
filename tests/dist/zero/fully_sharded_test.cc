// ZeRO-3 (FullyShardedDataParallel) against DDP: equal parameters after 5 steps of SGD with
// momentum and of Adam (1e-6, f64), with gradient accumulation over two backward calls, a unit
// whose flat size is not divisible by N (its last shard holds padding), an unused parameter,
// reshard_after_forward(false), clipping, ResNet-20 and f16 parameters; GradScaler over the
// shards; the units a policy chooses; the full state dict equal to the DDP model's and loadable
// into the unwrapped model; bad options; the claim error with DDP. Memory, prefetching and the
// communication volume are fully_sharded_memory_test.cc's.
#include "dist/zero/fully_sharded.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "dist/amp.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/module_sync.h"
#include "nn/activation.h"
#include "models/resnet.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/dist/zero/fully_sharded_fixtures.h"

namespace tessera {
namespace dist {
namespace {

using namespace fsdp_test;

TEST(FullySharded, EqualsDdpWithSgdMomentum) { fsdp_matches_ddp(sgd(), 1); }
TEST(FullySharded, EqualsDdpWithAdam) { fsdp_matches_ddp(adam(), 1); }
TEST(FullySharded, GradientAccumulationOverTwoBackwardsEqualsDdp) {
  fsdp_matches_ddp(sgd(), 2);
  fsdp_matches_ddp(adam(), 2);
}

// A Linear with an extra parameter its forward never uses.
struct LinearWithUnused : nn::Linear {
  LinearWithUnused(int64_t in, int64_t out) : nn::Linear(in, out) {
    register_parameter("unused", ones({3}));
  }
};

TEST(FullySharded, AUnitWithAnUnusedParameterEqualsDdp) {
  // The unit's gradients are reduced from the post-backward callback, the unused parameter
  // counting as zero (DDP's find_unused_parameters gives it a zero gradient too).
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto model = [] {
    auto m = mlp();
    manual_seed(5);
    auto m2 = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        (*m)[0], (*m)[1], std::make_shared<LinearWithUnused>(63, 61), (*m)[3], (*m)[4]});
    m2->to(kF64);
    return m2;
  };
  auto ddp_model = model();
  DistributedDataParallel ddp(ddp_model, world, DDPOptions().find_unused_parameters(true));
  auto ddp_opt = sgd()(ddp_model->parameters());
  FullyShardedDataParallel fsdp(model(), world, options());
  auto fsdp_opt = sgd()(fsdp.shard_parameters());
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    ddp_opt->step();
    fsdp_opt->step();
  }
  expect_equal_states(ddp_model->state_dict(), fsdp.state_dict(), 1e-6);
}

TEST(FullySharded, ResNet20WithEveryBlockAUnitEqualsDdp) {
  // Stem, nine BasicBlocks and head, each a unit (BatchNorm weights inside the units; the
  // running statistics are buffers, not sharded). In training BatchNorm normalizes with the
  // batch's statistics, so the parameters match DDP's whatever each rank's running statistics.
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto resnet = [] {
    manual_seed(3);
    auto m = models::ResNet20(1, 10);
    m->to(kF64);
    return m;
  };
  auto ddp_model = resnet();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = sgd()(ddp_model->parameters());
  FullyShardedDataParallel fsdp(resnet(), world);
  EXPECT_EQ(fsdp.units().size(), 11u);
  auto fsdp_opt = sgd()(fsdp.shard_parameters());
  for (int step = 0; step < 3; ++step) {
    Generator g(900 + step);
    const Tensor x = randn({2 * N, 1, 12, 12}, kF64, &g).narrow(0, 2 * r, 2);
    const Tensor y = arange(2 * N, kI64).narrow(0, 2 * r, 2);
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    ddp_opt->step();
    fsdp_opt->step();
  }
  const StateDict full = fsdp.state_dict();
  for (const auto& [name, p] : ddp_model->named_parameters()) {
    ASSERT_TRUE(full.contains(name)) << name;
    EXPECT_LT(max_abs_diff(full.at(name), p.data()), 1e-6) << name;
  }
}

TEST(FullySharded, StartsFromRankZerosModel) {
  // Each rank builds a different model; the wrapper takes rank 0's.
  auto world = dist::world();
  auto own = [&] {
    auto m = mlp();
    manual_seed(100 + world->rank());
    for (const Variable& p : m->parameters()) Tensor(p.data()).copy_(randn(p.shape(), kF64));
    return m;
  };
  auto reference = own();
  broadcast_module_states(*reference, *world, 0);
  FullyShardedDataParallel fsdp(own(), world, options());
  expect_equal_states(reference->state_dict(), fsdp.state_dict(), 1e-300);
}

TEST(FullySharded, ClipGradNormEqualsClippingDdpsAveragedGradients) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = sgd()(ddp_model->parameters());
  FullyShardedDataParallel fsdp(mlp(), world, options());
  auto fsdp_opt = sgd()(fsdp.shard_parameters());
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    const double full = optim::clip_grad_norm(ddp_model->parameters(), 0.05);
    const double sharded = fsdp.clip_grad_norm(0.05);
    EXPECT_NEAR(sharded, full, 1e-9 * full);
    EXPECT_GT(full, 0.05);  // so the clipping did scale the gradients
    ddp_opt->step();
    fsdp_opt->step();
  }
  expect_equal_states(ddp_model->state_dict(), fsdp.state_dict(), 1e-6);
}

TEST(FullyShardedAmp, GradScalerStepsTheShardsAndEveryRankSkipsAnOverflowTogether) {
  // f32 parameters under f16 autocast; the scaler reads optimizer.gradient_variables(), the
  // shards, and reduces found_inf across the group, so an inf in one rank's shard gradient makes
  // every rank skip.
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto model = mlp();
  model->to(kF32);
  FullyShardedDataParallel fsdp(model, world, options());
  optim::Adam opt(fsdp.shard_parameters(), optim::AdamOptions(1e-2));
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024),
                           found_inf_all_reduce(world));
  for (int step = 0; step < 4; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    opt.zero_grad();
    Variable loss;
    {
      AutocastGuard autocast(kF16);
      loss = cross_entropy(fsdp.forward(Variable(x.to(kF32))), y);
    }
    scaler.scale(loss).backward();
    std::vector<Tensor> before;
    for (const Variable& s : fsdp.shard_parameters()) before.push_back(s.data().clone());
    const bool poisoned = step == 2;
    if (poisoned && r == N - 1) Tensor(opt.gradient_variables()[0].grad()).fill_(1.0 / 0.0);
    EXPECT_EQ(scaler.step(opt), !poisoned) << "step " << step;
    scaler.update();
    bool unchanged = true;
    for (size_t i = 0; i < before.size(); ++i) {
      unchanged = unchanged && allclose(before[i], fsdp.shard_parameters()[i].data(), 0, 0);
    }
    EXPECT_EQ(unchanged, poisoned) << "step " << step;
  }
  EXPECT_EQ(scaler.get_scale(), 512.0);
  // Every rank holds the same full model.
  for (const auto& [name, t] : fsdp.state_dict()) {
    Tensor root = t.clone();
    world->broadcast(root, 0)->wait();
    EXPECT_TRUE(allclose(root, t, 0, 0)) << name;
  }
}

TEST(FullyShardedAmp, HalfParametersGatherInHalfAndStepAnF32MasterShard) {
  // f16 parameters: gathered and reduced in f16, stepped as an f32 shard; DDP's optimizer keeps
  // an f32 master of each f16 parameter. Same arithmetic up to f16 rounding of the reductions
  // (measured: at most 1 ulp of f16, 6.1e-5, on 2 and 4 ranks).
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto half_mlp = [] {
    auto m = mlp();
    m->to(kF16);
    return m;
  };
  auto ddp_model = half_mlp();
  DistributedDataParallel ddp(ddp_model, world);
  optim::SGD ddp_opt(ddp_model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  FullyShardedDataParallel fsdp(half_mlp(), world, options());
  optim::SGD fsdp_opt(fsdp.shard_parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (const Variable& s : fsdp.shard_parameters()) EXPECT_EQ(s.dtype(), kF32);
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    ddp_opt.zero_grad();
    fsdp_opt.zero_grad();
    cross_entropy(ddp.forward(Variable(x.to(kF16))), y).backward();
    cross_entropy(fsdp.forward(Variable(x.to(kF16))), y).backward();
    ddp_opt.step();
    fsdp_opt.step();
  }
  const StateDict full = fsdp.state_dict();
  for (const auto& [name, t] : ddp_model->state_dict()) {
    ASSERT_TRUE(full.contains(name)) << name;
    EXPECT_EQ(full.at(name).dtype(), kF16) << name;
    EXPECT_LT(max_abs_diff(full.at(name).to(kF32), t.to(kF32)), 5e-4) << name;
  }
}

TEST(FullyShardedOptionsTest, UnitsFromSizePolicyExplicitListAndRoot) {
  auto world = dist::world();
  const int N = world->size();
  FullyShardedDataParallel by_size(mlp(), world, options());
  const std::vector<std::vector<size_t>> expected{{0}, {2}, {4}};  // unit0, unit1, root
  EXPECT_EQ(by_size.unit_children(), expected);
  FullyShardedDataParallel explicit_units(mlp(), world, FullyShardedOptions().units({0, 2}));
  EXPECT_EQ(explicit_units.unit_children(), expected);
  // Unit 0 straddles the padding on 2 and 4 ranks (4095 elements); on 3 it divides evenly,
  // and unit 1 (3904 elements) is the padded one.
  const FlatParameter& u0 = *by_size.units()[0];
  const FlatParameter& u1 = *by_size.units()[1];
  EXPECT_EQ(u0.numel(), 4095);
  EXPECT_EQ(u0.padded_numel(), (4095 + N - 1) / N * N);
  EXPECT_EQ(u1.padded_numel(), (3904 + N - 1) / N * N);
  if (N > 1) {
    EXPECT_GT(u0.padded_numel() + u1.padded_numel(), u0.numel() + u1.numel());
  }
  EXPECT_EQ(u0.shard_numel() * N, u0.padded_numel());
  EXPECT_EQ(by_size.units()[2]->name(), "root");
  // Outside forward and backward the parameters hold nothing: their shapes, no bytes.
  for (const Variable& p : by_size.module().parameters()) {
    EXPECT_EQ(p.data().storage()->data(), nullptr) << p.name();
    EXPECT_NE(p.data().storage()->absent_why(), "") << p.name();
  }
}

// A model whose forward calls a wrapped layer's forward() directly skips the hooks that gather
// it: the read of its absent weight says so, naming the parameter and the call to make instead
// (the same on every rank, before any collective could mismatch).
struct BypassingNet : nn::Module {
  Variable forward(const Variable& x) override { return fc2->forward(relu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1 = register_module<nn::Linear>("fc1", 8, 16);
  std::shared_ptr<nn::Linear> fc2 = register_module<nn::Linear>("fc2", 16, 4);
};

TEST(FullyShardedOptionsTest, AWrappedLayerCalledWithoutItsHooksIsAnError) {
  auto net = std::make_shared<BypassingNet>();
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(net);
  FullyShardedDataParallel fsdp(seq, dist::world(), FullyShardedOptions().wrap_layers(true));
  try {
    fsdp.forward(Variable(zeros({2, 8})));
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tensor holds no values: it is parameter '0.fc2.weight' "
                                         "([4, 16] f32) of FullyShardedDataParallel's unit"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("call the module as (*module)(x), which runs the hooks, "
                                         "not module->forward(x)"), std::string::npos);
  }
}

TEST(FullyShardedOptionsTest, BadOptionsAreErrorsNamingTheValue) {
  auto world = dist::world();
  auto message = [&](const FullyShardedOptions& o) {
    try {
      FullyShardedDataParallel fsdp(mlp(), world, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(FullyShardedOptions().units({7})).find("child 7 out of range"),
            std::string::npos);
  EXPECT_NE(message(FullyShardedOptions().units({1})).find("child 1 (ReLU) has no parameters"),
            std::string::npos);
  EXPECT_NE(message(FullyShardedOptions().prefetch_limit(-1)).find("got -1"), std::string::npos);
  EXPECT_NE(message(FullyShardedOptions().min_num_params(0)).find("got 0"), std::string::npos);
}

TEST(FullyShardedStateDict, EqualsDdpModelsAndLoadsIntoTheUnwrappedModel) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  optim::Adam ddp_opt(ddp_model->parameters(), optim::AdamOptions(1e-2));
  FullyShardedDataParallel fsdp(mlp(), world, options());
  optim::Adam fsdp_opt(fsdp.shard_parameters(), optim::AdamOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    ddp_opt.zero_grad();
    fsdp_opt.zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    ddp_opt.step();
    fsdp_opt.step();
  }
  const StateDict full = fsdp.state_dict();
  expect_equal_states(ddp_model->state_dict(), full, 1e-6);
  // An unwrapped model loads it and computes what the sharded one computes.
  auto plain = mlp();
  plain->load_state_dict(full);
  const auto [x, y] = rank_batch(9, N, r);
  EXPECT_LT(max_abs_diff(plain->forward(Variable(x)).data(), fsdp.forward(Variable(x)).data()),
            1e-12);
  // And loading a full state dict back into the shards round-trips.
  FullyShardedDataParallel other(mlp(), world, options());
  other.load_state_dict(full);
  expect_equal_states(full, other.state_dict(), 0.0 + 1e-300);
}

TEST(FullyShardedAndDdp, OnTheSameParametersIsAnError) {
  auto world = dist::world();
  auto model = mlp();
  {
    DistributedDataParallel ddp(model, world);
    EXPECT_THROW(FullyShardedDataParallel(model, world, options()), Error);
  }
  // Once the DDP wrapper is gone its claim is released; now FSDP holds it.
  FullyShardedDataParallel fsdp(model, world, options());
  try {
    DistributedDataParallel ddp(model, world);
    ADD_FAILURE() << "DDP on parameters FSDP reduces";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("FullyShardedDataParallel"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
