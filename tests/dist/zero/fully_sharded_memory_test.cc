// ZeRO-3 (FullyShardedDataParallel)'s memory, measured by the counting allocator, and its
// traffic, from the byte ledger: shards after construction ~ psi / N, model state (8+8+K) psi / N,
// one unit gathered at a time in forward, 1 + prefetch_limit with prefetch (which still equals
// DDP), which units are gathered between two units in forward and backward, gradients sharded
// after backward; 1.5x DDP's bytes, and DDP's without reshard_after_forward.
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

// The activations of a forward of x, measured on the unwrapped model (its parameters resident).
int64_t unwrapped_activations(const Tensor& x) {
  auto plain = mlp();
  Variable keep;
  return forward_peak([&] { keep = plain->forward(Variable(x)); });
}

TEST(FullyShardedMemory, ForwardHoldsOneUnitGatheredAtATime) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  const int64_t activations = unwrapped_activations(x);
  FullyShardedDataParallel fsdp(mlp(), world, options());
  Variable keep;
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
  const int64_t activations = unwrapped_activations(x);
  Variable keep;
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

}  // namespace
}  // namespace dist
}  // namespace tessera
