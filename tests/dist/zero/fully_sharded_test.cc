// ZeRO-3 (FullyShardedDataParallel) against DDP: equal parameters after 5 steps of SGD with
// momentum and of Adam (1e-6, f64), with gradient accumulation over two backward calls, a unit
// whose flat size is not divisible by N (its last shard holds padding), an unused parameter,
// prefetching, reshard_after_forward(false), clipping, ResNet-20 and f16 parameters; GradScaler
// over the shards; the memory measured by the allocator (shards after construction ~ psi / N,
// model state (8+8+K) psi / N, one unit gathered at a time in forward, 1 + prefetch_limit with
// prefetch, which units are gathered between two units in forward and backward); the
// communication volume from the byte ledger (1.5x DDP's); the full state dict equal to the DDP
// model's and loadable into the unwrapped model; the claim error with DDP.
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

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kPerRank = 5;

// Children 0 (64x63+63 = 4095 parameters, odd: padded on 2 and 4 ranks) and 2 (3904) are units
// under min_num_params(1000); child 4 (620) is the root unit.
std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(23);
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(64, 63), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(63, 61), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(61, 10)});
  m->to(kF64);
  return m;
}

FullyShardedOptions options() { return FullyShardedOptions().min_num_params(1000); }

std::pair<Tensor, Tensor> rank_batch(int step, int world, int rank) {
  Generator g(700 + step);
  const Tensor x = randn({kPerRank * world, 64}, kF64, &g);
  const Tensor y = arange(kPerRank * world, kI64);
  const Tensor labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);
  return {x.narrow(0, rank * kPerRank, kPerRank), labels.narrow(0, rank * kPerRank, kPerRank)};
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable>)>;

MakeOpt adam() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3));
  };
}
MakeOpt sgd() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  };
}

void expect_equal_states(const StateDict& a, const StateDict& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    ASSERT_EQ(b.at(name).shape(), t.shape()) << name;
    EXPECT_LT(max_abs_diff(b.at(name), t), tolerance) << name;
  }
}

// `micro` backward calls per step, 5 steps; returns after comparing with DDP.
void fsdp_matches_ddp(const MakeOpt& make, int micro,
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
  // Outside forward and backward the parameters hold nothing.
  for (const Variable& p : by_size.module().parameters()) EXPECT_EQ(p.numel(), 0) << p.name();
}

// A model whose forward calls a wrapped layer's forward() directly skips the hooks that gather
// it: the layer says so, naming the call to make instead (the same on every rank, before any
// collective could mismatch).
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
    EXPECT_NE(std::string(e.what()).find("Linear(16, 4): its weight holds no values ([0]): "
                                         "FullyShardedDataParallel released it"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("call the layer as (*layer)(x)"), std::string::npos);
  }
}

TEST(FullyShardedMemory, ParameterBytesPerRankAfterConstructionArePsiOverN) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  FullyShardedDataParallel fsdp(mlp(), world, options());
  const int64_t held = memory_stats(Device::cpu()).current_bytes - before;
  int64_t psi = 0, padded = 0;
  for (const auto& u : fsdp.units()) {
    psi += u->numel();
    padded += u->padded_numel();
  }
  if (r == 0) {
    std::printf("ZeRO-3 parameter bytes on rank 0 after construction: measured %lld, formula "
                "8 psi / N = 8 x %lld / %d = %.0f (+ padding: 8 x %lld / %d = %lld)\n",
                static_cast<long long>(held), static_cast<long long>(psi), N, 8.0 * psi / N,
                static_cast<long long>(padded), N, static_cast<long long>(8 * padded / N));
  }
  EXPECT_EQ(held, 8 * padded / N);
}

TEST(FullyShardedMemory, ModelStateBytesMatchTheZeroPaperFormula) {
  // Parameters + gradients + Adam state resident right after a backward (before the step), as
  // the ZeRO paper counts model state; f64 here, so 8 + 8 + K psi / N with K = 16 (two f64
  // moments), against DDP's (8 + 8 + K) psi.
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  FullyShardedDataParallel fsdp(mlp(), world, options());
  optim::Adam opt(fsdp.shard_parameters(), optim::AdamOptions(1e-3));
  cross_entropy(fsdp.forward(Variable(x)), y).backward();
  opt.step();  // creates the optimizer state
  opt.zero_grad();
  cross_entropy(fsdp.forward(Variable(x)), y).backward();
  const int64_t measured = memory_stats(Device::cpu()).current_bytes - before;
  int64_t psi = 0;
  for (const auto& u : fsdp.units()) psi += u->numel();
  const double predicted = (8 + 8 + 16) * static_cast<double>(psi) / N;
  if (r == 0) {
    std::printf("ZeRO-3 model state on rank 0 (f64, Adam): measured %lld, formula "
                "(8 + 8 + 16) psi / N = 32 x %lld / %d = %.0f (DDP: %.0f)\n",
                static_cast<long long>(measured), static_cast<long long>(psi), N, predicted,
                32.0 * psi);
  }
  EXPECT_NEAR(static_cast<double>(measured), predicted, 0.05 * predicted);
}

// The bytes a forward of `run` allocates beyond what was in use before it, at its peak.
template <typename F>
int64_t forward_peak(F run) {
  const int64_t base = memory_stats(Device::cpu()).current_bytes;
  reset_peak(Device::cpu());
  run();
  return memory_stats(Device::cpu()).peak_bytes - base;
}

TEST(FullyShardedMemory, ForwardHoldsOneUnitGatheredAtATime) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  // The activations of this forward, measured on the unwrapped model (parameters resident).
  auto plain = mlp();
  Variable keep;
  const int64_t activations = forward_peak([&] { keep = plain->forward(Variable(x)); });
  keep = Variable();
  FullyShardedDataParallel fsdp(mlp(), world, options());
  int64_t largest = 0, all = 0;
  for (const auto& u : fsdp.units()) {
    largest = std::max(largest, 8 * u->padded_numel());
    all += 8 * u->padded_numel();
  }
  const int64_t peak = forward_peak([&] { keep = fsdp.forward(Variable(x)); });
  if (r == 0) {
    std::printf("ZeRO-3 forward peak on rank 0 above baseline: measured %lld; largest unit "
                "%lld + activations %lld = %lld (all units gathered would be %lld + %lld)\n",
                static_cast<long long>(peak), static_cast<long long>(largest),
                static_cast<long long>(activations), static_cast<long long>(largest + activations),
                static_cast<long long>(all), static_cast<long long>(activations));
  }
  EXPECT_GE(peak, largest);
  EXPECT_LE(peak, largest + activations);
  // After the forward every unit is resharded again.
  for (const auto& u : fsdp.units()) EXPECT_FALSE(u->gathered()) << u->name();
  cross_entropy(keep, y).backward();
  for (const auto& u : fsdp.units()) EXPECT_FALSE(u->gathered()) << u->name();
}

TEST(FullyShardedPrefetch, EqualsDdpAndGathersAtMostOnePlusLimitUnits) {
  const FullyShardedOptions prefetching = options().prefetch_limit(1);
  fsdp_matches_ddp(sgd(), 2, prefetching);
  fsdp_matches_ddp(adam(), 1, prefetching);

  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  auto plain = mlp();
  Variable keep;
  const int64_t activations = forward_peak([&] { keep = plain->forward(Variable(x)); });
  keep = Variable();
  for (int limit : {1, 2}) {
    FullyShardedDataParallel fsdp(mlp(), world, options().prefetch_limit(limit));
    std::vector<int64_t> bytes;
    for (const auto& u : fsdp.units()) bytes.push_back(8 * u->padded_numel());
    std::sort(bytes.rbegin(), bytes.rend());
    int64_t bound = 0;  // the 1 + limit largest units
    for (int k = 0; k <= limit && k < static_cast<int>(bytes.size()); ++k) bound += bytes[k];
    world->ledger().reset();
    const int64_t peak = forward_peak([&] { keep = fsdp.forward(Variable(x)); });
    if (r == 0) {
      std::printf("ZeRO-3 forward peak with prefetch_limit %d on rank 0: measured %lld; "
                  "%d largest units %lld + activations %lld = %lld\n", limit,
                  static_cast<long long>(peak), limit + 1, static_cast<long long>(bound),
                  static_cast<long long>(activations), static_cast<long long>(bound + activations));
    }
    // Units 0 and 1 (the two largest) are gathered together once unit 0 prefetches unit 1.
    EXPECT_GE(peak, bytes[0] + bytes[1]);
    EXPECT_LE(peak, bound + activations);
    cross_entropy(keep, y).backward();
    keep = Variable();
    for (const auto& u : fsdp.units()) EXPECT_FALSE(u->gathered() || u->gathering()) << u->name();
    // Prefetching moves gathers earlier, never adds any.
    int64_t shards = 0;
    for (const auto& u : fsdp.units()) shards += u->shard_numel();
    EXPECT_EQ(world->ledger().total_bytes(), 3 * (N - 1) * shards * 8);
  }
}

// A parameter-free layer between two units that reports, in forward and when its gradient
// arrives in backward, which units hold their full parameters.
struct Probe : nn::Module {
  std::function<void()> on_forward, on_backward;
  Variable forward(const Variable& x) override {
    on_forward();
    Variable y = x * 1.0;
    y.register_hook([this](Tensor&) { on_backward(); });
    return y;
  }
};

TEST(FullyShardedMemory, BetweenUnitsOnlyThePrefetchedUnitIsGathered) {
  // Sequential: unit0 (Linear) ReLU Probe unit1 (Linear) ReLU root (Linear). At the probe,
  // forward: unit0 has been resharded, unit1 not gathered yet (or being prefetched); backward:
  // unit1 has been reduced and resharded, unit0 not re-gathered yet (or being prefetched from
  // unit1's pre-backward hook).
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  for (int limit : {0, 1}) {
    auto m = mlp();
    auto probe = std::make_shared<Probe>();
    auto with_probe = std::make_shared<nn::Sequential>();
    with_probe->push_back("0", (*m)[0]);
    with_probe->push_back("1", (*m)[1]);
    with_probe->push_back("probe", probe);
    with_probe->push_back("2", (*m)[2]);
    with_probe->push_back("3", (*m)[3]);
    with_probe->push_back("4", (*m)[4]);
    FullyShardedDataParallel fsdp(with_probe, world, options().prefetch_limit(limit));
    ASSERT_EQ(fsdp.units().size(), 3u);
    const FlatParameter &u0 = *fsdp.units()[0], &u1 = *fsdp.units()[1], &root = *fsdp.units()[2];
    int forwards = 0, backwards = 0;
    probe->on_forward = [&] {
      ++forwards;
      EXPECT_FALSE(u0.gathered() || u0.gathering()) << "limit " << limit;
      EXPECT_FALSE(u1.gathered()) << "limit " << limit;
      EXPECT_EQ(u1.gathering(), limit > 0) << "limit " << limit;
      EXPECT_FALSE(root.gathered() || root.gathering()) << "limit " << limit;
    };
    probe->on_backward = [&] {
      ++backwards;
      EXPECT_FALSE(u1.gathered() || u1.gathering()) << "limit " << limit;
      EXPECT_TRUE(u1.reduce_scatter_pending()) << "limit " << limit;
      EXPECT_FALSE(u0.gathered()) << "limit " << limit;
      EXPECT_EQ(u0.gathering(), limit > 0) << "limit " << limit;
      EXPECT_FALSE(root.gathered() || root.gathering()) << "limit " << limit;
    };
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    EXPECT_EQ(forwards, 1);
    EXPECT_EQ(backwards, 1);
  }
}

TEST(FullyShardedMemory, GradientsAreShardedAfterBackward) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  FullyShardedDataParallel fsdp(mlp(), world, options());
  const auto [x, y] = rank_batch(0, N, r);
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  cross_entropy(fsdp.forward(Variable(x)), y).backward();
  const int64_t held = memory_stats(Device::cpu()).current_bytes - before;
  int64_t shard_bytes = 0;
  for (const auto& u : fsdp.units()) shard_bytes += 8 * u->shard_numel();
  if (r == 0) {
    std::printf("ZeRO-3 gradient bytes on rank 0 after backward: measured %lld, formula "
                "8 padded psi / N = %lld\n", static_cast<long long>(held),
                static_cast<long long>(shard_bytes));
  }
  EXPECT_EQ(held, shard_bytes);
  for (const Variable& p : fsdp.module().parameters()) EXPECT_FALSE(p.grad().defined());
  for (const Variable& s : fsdp.shard_parameters()) {
    ASSERT_TRUE(s.grad().defined());
    EXPECT_EQ(s.grad().numel(), s.numel());
  }
}

TEST(FullyShardedCommunication, SendsOneAndAHalfTimesDdpsBytes) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  auto ddp_model = mlp();
  DistributedDataParallel ddp(ddp_model, world);
  world->ledger().reset();
  cross_entropy(ddp.forward(Variable(x)), y).backward();
  const int64_t ddp_bytes = world->ledger().total_bytes();
  FullyShardedDataParallel fsdp(mlp(), world, options());
  world->ledger().reset();
  cross_entropy(fsdp.forward(Variable(x)), y).backward();
  const int64_t fsdp_bytes = world->ledger().total_bytes();
  int64_t psi = 0, shards = 0;
  for (const auto& u : fsdp.units()) {
    psi += u->numel();
    shards += u->shard_numel();
  }
  // Two all-gathers and one reduce-scatter per unit, each sending N-1 shards from every rank.
  const int64_t theory = 3 * (N - 1) * shards * 8;
  if (r == 0) {
    std::printf("ZeRO-3 bytes sent per step on rank 0: measured %lld, formula 3 (N-1) S 8 = "
                "%lld; DDP %lld (2 (N-1)/N psi 8 = %.0f); ratio %.4f (1.5 x padded/psi = %.4f)\n",
                static_cast<long long>(fsdp_bytes), static_cast<long long>(theory),
                static_cast<long long>(ddp_bytes), 2.0 * (N - 1) / N * psi * 8,
                static_cast<double>(fsdp_bytes) / ddp_bytes, 1.5 * shards * N / psi);
  }
  EXPECT_EQ(fsdp_bytes, theory);
  const auto& ag = world->ledger().entry(CollectiveKind::kAllGather);
  const auto& rs = world->ledger().entry(CollectiveKind::kReduceScatter);
  EXPECT_EQ(ag.calls, 2 * 3);  // three units, forward and backward
  EXPECT_EQ(rs.calls, 3);
  EXPECT_NEAR(static_cast<double>(fsdp_bytes) / ddp_bytes, 1.5, 0.01);
}

TEST(FullyShardedCommunication, WithoutReshardAfterForwardSendsDdpsBytes) {
  // Units stay gathered from their forward to the end of backward: no backward all-gather, so
  // 2 (N-1) S per unit, DDP's volume; still equal to DDP.
  fsdp_matches_ddp(sgd(), 2, options().reshard_after_forward(false));
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  FullyShardedDataParallel fsdp(mlp(), world, options().reshard_after_forward(false));
  world->ledger().reset();
  Variable loss = cross_entropy(fsdp.forward(Variable(x)), y);
  for (const auto& u : fsdp.units()) EXPECT_TRUE(u->gathered()) << u->name();
  loss.backward();
  for (const auto& u : fsdp.units()) EXPECT_FALSE(u->gathered()) << u->name();
  int64_t shards = 0;
  for (const auto& u : fsdp.units()) shards += u->shard_numel();
  EXPECT_EQ(world->ledger().total_bytes(), 2 * (N - 1) * shards * 8);
  EXPECT_EQ(world->ledger().entry(CollectiveKind::kAllGather).calls, 3);
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
