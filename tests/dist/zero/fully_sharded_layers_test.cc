// ZeRO-3 with layer-wise units (FullyShardedOptions().wrap_layers(true)): every convolution,
// batch norm and linear of a ResNet is its own unit, gathered and freed by forward hooks inside
// its block. Against DDP: equal parameters after 3 SGD steps (f64, 1e-9), the units being the
// layers; the forward holds one layer gathered at a time (its peak is a layer's bytes plus the
// activations, less than with one unit per block); the bytes on the wire are still three
// passes over the padded shards (two all-gathers and a reduce-scatter) per step; prefetching
// keeps the result; and listing units with wrap_layers is an error naming both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "models/resnet.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

// ResNet-8 (stem, three BasicBlocks, one with a projection-free option-A shortcut per stage
// change, head): 20 modules with parameters of their own.
std::shared_ptr<nn::Sequential> resnet() {
  manual_seed(3);
  auto m = models::ResNetCifar(8, 1, 10);
  m->to(kF64);
  return m;
}

std::pair<Tensor, Tensor> rank_batch(int step, int N, int r) {
  Generator g(900 + step);
  const Tensor x = randn({2 * N, 1, 12, 12}, kF64, &g).narrow(0, 2 * r, 2);
  const Tensor y = arange(2 * N, kI64).narrow(0, 2 * r, 2);
  return {x, y};
}

std::unique_ptr<optim::SGD> sgd(std::vector<Variable> p) {
  return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
}

int64_t modules_with_own_parameters(nn::Module& model) {
  int64_t n = 0;
  for (const auto& [name, m] : model.named_modules()) {
    if (!m->named_parameters(/*recurse=*/false).empty()) ++n;
  }
  return n;
}

void layers_match_ddp(int prefetch_limit) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto ddp_model = resnet();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = sgd(ddp_model->parameters());
  auto model = resnet();
  const int64_t layers = modules_with_own_parameters(*model);
  FullyShardedDataParallel fsdp(model, world,
                                FullyShardedOptions().wrap_layers(true).prefetch_limit(prefetch_limit));
  ASSERT_EQ(static_cast<int64_t>(fsdp.units().size()), layers);
  int nested = 0;
  for (size_t u = 0; u < fsdp.units().size(); ++u) nested += fsdp.unit_module(u) != nullptr;
  EXPECT_GT(nested, 0);
  auto fsdp_opt = sgd(fsdp.shard_parameters());
  int64_t shards = 0;
  for (const auto& u : fsdp.units()) shards += u->shard_numel();
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    world->ledger().reset();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    // Each unit all-gathered twice and reduce-scattered once: (N-1) shards each time.
    EXPECT_EQ(world->ledger().total_bytes(), 3 * (N - 1) * shards * 8) << "step " << step;
    for (const auto& u : fsdp.units()) {
      EXPECT_FALSE(u->gathered() || u->gathering() || u->reduce_scatter_pending()) << u->name();
    }
    ddp_opt->step();
    fsdp_opt->step();
  }
  const StateDict full = fsdp.state_dict();
  for (const auto& [name, p] : ddp_model->named_parameters()) {
    ASSERT_TRUE(full.contains(name)) << name;
    EXPECT_LT(max_abs_diff(full.at(name), p.data()), 1e-9) << name;
  }
}

TEST(FullyShardedLayers, EveryLayerAUnitEqualsDdp) { layers_match_ddp(0); }
TEST(FullyShardedLayers, WithPrefetchEqualsDdp) { layers_match_ddp(1); }

// The bytes a forward allocates beyond what was in use before it, at its peak.
int64_t forward_peak(const std::function<Variable()>& run, Variable& keep) {
  const int64_t base = memory_stats(Device::cpu()).current_bytes;
  reset_peak(Device::cpu());
  keep = run();
  return memory_stats(Device::cpu()).peak_bytes - base;
}

TEST(FullyShardedLayers, ForwardHoldsOneLayerGatheredAtATime) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  const auto [x, y] = rank_batch(0, N, r);
  Variable keep;
  auto plain = resnet();
  const int64_t activations = forward_peak([&] { return plain->forward(Variable(x)); }, keep);
  keep = Variable();
  FullyShardedDataParallel layers(resnet(), world, FullyShardedOptions().wrap_layers(true));
  FullyShardedDataParallel blocks(resnet(), world);  // one unit per block
  int64_t largest_layer = 0, largest_block = 0;
  for (const auto& u : layers.units()) largest_layer = std::max(largest_layer, 8 * u->padded_numel());
  for (const auto& u : blocks.units()) largest_block = std::max(largest_block, 8 * u->padded_numel());
  const int64_t layer_peak = forward_peak([&] { return layers.forward(Variable(x)); }, keep);
  keep = Variable();
  const int64_t block_peak = forward_peak([&] { return blocks.forward(Variable(x)); }, keep);
  keep = Variable();
  if (r == 0) {
    std::printf("ZeRO-3 forward peak on rank 0 above baseline: layer units %lld (largest layer "
                "%lld + activations %lld = %lld), block units %lld (largest block %lld)\n",
                static_cast<long long>(layer_peak), static_cast<long long>(largest_layer),
                static_cast<long long>(activations),
                static_cast<long long>(largest_layer + activations),
                static_cast<long long>(block_peak), static_cast<long long>(largest_block));
  }
  EXPECT_GE(layer_peak, largest_layer);
  EXPECT_LE(layer_peak, largest_layer + activations);
  EXPECT_LT(largest_layer, largest_block);
  EXPECT_LT(layer_peak, block_peak);
}

// A block that registers its layers in one order and calls them in the other.
class Swapped : public nn::Module {
 public:
  Swapped() {
    second_ = register_module("second", std::make_shared<nn::Linear>(16, 16));
    first_ = register_module("first", std::make_shared<nn::Linear>(16, 16));
  }
  Variable forward(const Variable& x) override { return (*second_)(relu((*first_)(x))); }

 private:
  std::shared_ptr<nn::Linear> first_, second_;
};

// All-gathers per step from the ledger, steps 1..3: each unit gathered once in forward and once
// in backward when the prefetches follow the order the units really run in (recorded by the
// forward, reversed for backward). Following the registration order instead, Swapped's forward
// prefetches `first` again after it ran (5 per forward, not 4 gathers).
TEST(FullyShardedLayers, PrefetchFollowsTheRecordedExecutionOrder) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto model = [] {
    manual_seed(5);
    auto m = std::make_shared<nn::Sequential>();
    m->push_back(std::make_shared<Swapped>());
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<Swapped>());
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Linear>(16, 8));  // classes for 2 N labels, N <= 4
    m->to(kF64);
    return m;
  };
  auto ddp_model = model();
  DistributedDataParallel ddp(ddp_model, world);
  auto ddp_opt = sgd(ddp_model->parameters());
  FullyShardedDataParallel fsdp(model(), world,
                                FullyShardedOptions().wrap_layers(true).prefetch_limit(1));
  ASSERT_EQ(fsdp.units().size(), 5u);
  auto fsdp_opt = sgd(fsdp.shard_parameters());
  for (int step = 0; step < 4; ++step) {
    Generator g(40 + step);
    const Tensor x = randn({2 * N, 16}, kF64, &g).narrow(0, 2 * r, 2);
    const Tensor y = arange(2 * N, kI64).narrow(0, 2 * r, 2);
    ddp_opt->zero_grad();
    fsdp_opt->zero_grad();
    cross_entropy(ddp.forward(Variable(x)), y).backward();
    world->ledger().reset();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    const int64_t gathers = world->ledger().entry(CollectiveKind::kAllGather).calls;
    // The first forward has no recorded order yet: it follows the registration order.
    if (step > 0) {
      EXPECT_EQ(gathers, 2 * 5) << "step " << step;
    }
    ddp_opt->step();
    fsdp_opt->step();
  }
  const StateDict full = fsdp.state_dict();
  for (const auto& [name, p] : ddp_model->named_parameters()) {
    EXPECT_LT(max_abs_diff(full.at(name), p.data()), 1e-9) << name;
  }
}

// ResNet-8, every layer a unit, prefetch 1: residual blocks run their shortcut beside the main
// path; still exactly two gathers per unit per step once the order is recorded.
TEST(FullyShardedLayers, ResidualBlocksGatherEachUnitTwicePerStep) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  FullyShardedDataParallel fsdp(resnet(), world,
                                FullyShardedOptions().wrap_layers(true).prefetch_limit(1));
  auto opt = sgd(fsdp.shard_parameters());
  const int64_t units = static_cast<int64_t>(fsdp.units().size());
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = rank_batch(step, N, r);
    opt->zero_grad();
    world->ledger().reset();
    cross_entropy(fsdp.forward(Variable(x)), y).backward();
    if (step > 0) {
      EXPECT_EQ(world->ledger().entry(CollectiveKind::kAllGather).calls, 2 * units)
          << "step " << step;
    }
    opt->step();
  }
}

TEST(FullyShardedLayers, UnitsAndWrapLayersTogetherAreAnError) {
  try {
    FullyShardedDataParallel fsdp(resnet(), dist::world(),
                                  FullyShardedOptions().units({0}).wrap_layers(true));
    FAIL() << "units() with wrap_layers(true) was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("units() lists 1 children and wrap_layers(true)"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
