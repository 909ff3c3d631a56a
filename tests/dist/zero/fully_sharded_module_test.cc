// ZeRO-3 on a model of the user's own (a Module with its own forward, not a Sequential), its
// units chosen by an auto-wrap policy (FSDP's auto_wrap_policy). The model has what such models
// have: blocks (a LayerNorm, two Linears, a gain of their own, a residual), a block called twice
// in one forward, a parameter of the model's own, and an output projection tied to the input
// embedding's weight.
//
// Against the same model trained in one process on the whole batch (f64, 1e-10 after 3 SGD
// steps with momentum): module_wrap_policy<Block>(), size_based_wrap_policy(40) (which nests
// units: a block around its Linears), the default (every layer), with prefetching and without
// resharding after forward. The units each policy makes are spelled out by parameter name.
// Errors: units() names a Sequential's children; a policy and wrap_layers together.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/auto_wrap_policy.h"
#include "dist/zero/fully_sharded.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kIn = 8, kWidth = 16;

struct Block : nn::Module {
  Block() { gain = register_parameter("gain", full({kWidth}, 1.0, kF64)); }
  Variable forward(const Variable& x) override {
    const Variable h = (*fc2)(relu((*fc1)((*ln)(x))));
    return x + h * gain;
  }
  std::shared_ptr<nn::LayerNorm> ln = register_module<nn::LayerNorm>("ln", kWidth);
  std::shared_ptr<nn::Linear> fc1 = register_module<nn::Linear>("fc1", kWidth, 2 * kWidth);
  std::shared_ptr<nn::Linear> fc2 = register_module<nn::Linear>("fc2", 2 * kWidth, kWidth);
  Variable gain;
};

// The output projection: the embedding's weight, transposed (weight tying).
struct TiedHead : nn::Module {
  explicit TiedHead(const Variable& w) : weight(register_tied_parameter("weight", w)) {}
  Variable forward(const Variable& h) override { return matmul(h, weight); }
  Variable weight;
};

struct Net : nn::Module {
  Net() {
    scale = register_parameter("scale", full({1}, 0.5, kF64));
    head = register_module<TiedHead>("head", embed->weight());
  }
  Variable forward(const Variable& x) override {
    Variable h = (*embed)(x);
    h = (*block0)(h);
    h = (*block1)(h);
    h = (*block0)(h);  // block0 again: its unit gathered for both calls, its gradient summed
    return (*head)(h) * scale;
  }
  std::shared_ptr<nn::Linear> embed = register_module<nn::Linear>("embed", kIn, kWidth);
  std::shared_ptr<Block> block0 = register_module<Block>("block0");
  std::shared_ptr<Block> block1 = register_module<Block>("block1");
  std::shared_ptr<TiedHead> head;
  Variable scale;
};

std::shared_ptr<Net> net() {
  manual_seed(5);
  auto m = std::make_shared<Net>();
  m->to(kF64);
  return m;
}

// The whole batch of a step (2 examples a rank, n <= 4 ranks: targets below kIn).
std::pair<Tensor, Tensor> batch(int step, int n) {
  Generator g(300 + step);
  return {randn({2 * n, kIn}, kF64, &g), arange(2 * n, kI64)};
}

std::unique_ptr<optim::SGD> sgd(std::vector<Variable> p) {
  return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9));
}

std::vector<std::set<std::string>> unit_parameter_names(const FullyShardedDataParallel& fsdp) {
  std::vector<std::set<std::string>> out;
  for (const auto& unit : fsdp.units()) {
    out.emplace_back();
    for (const auto& [name, p] : unit->params()) out.back().insert(name);
  }
  return out;
}

// 3 steps under FSDP with `options` equal 3 steps of one process on the whole batch.
void matches_one_process(const FullyShardedOptions& options,
                         const std::vector<std::set<std::string>>& expected_units) {
  auto world = dist::world();
  const int n = world->size(), r = world->rank();
  auto reference = net();
  auto reference_opt = sgd(reference->parameters());
  auto model = net();
  FullyShardedDataParallel fsdp(model, world, options);
  EXPECT_EQ(unit_parameter_names(fsdp), expected_units);
  auto opt = sgd(fsdp.shard_parameters());
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = batch(step, n);
    reference_opt->zero_grad();
    cross_entropy((*reference)(Variable(x)), y).backward();
    reference_opt->step();
    opt->zero_grad();
    cross_entropy(fsdp(Variable(x.narrow(0, 2 * r, 2))), y.narrow(0, 2 * r, 2)).backward();
    opt->step();
  }
  const StateDict got = fsdp.state_dict();
  for (const auto& [name, expected] : reference->state_dict()) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_TRUE(allclose(got.at(name), expected, 1e-10, 1e-10)) << name;
  }
  // Between steps every parameter is absent (its values live in the shards).
  for (const Variable& p : model->parameters()) {
    EXPECT_EQ(p.data().storage()->data(), nullptr) << p.name();
  }
}

TEST(FullyShardedModule, BlockPolicyUnitsAreTheBlocksAndTrainAsOneProcess) {
  matches_one_process(
      FullyShardedOptions().auto_wrap_policy(module_wrap_policy<Block>()),
      {{"block0.gain", "block0.ln.weight", "block0.ln.bias", "block0.fc1.weight", "block0.fc1.bias",
        "block0.fc2.weight", "block0.fc2.bias"},
       {"block1.gain", "block1.ln.weight", "block1.ln.bias", "block1.fc1.weight", "block1.fc1.bias",
        "block1.fc2.weight", "block1.fc2.bias"},
       {"scale", "embed.weight", "embed.bias"}});
}

TEST(FullyShardedModule, SizePolicyNestsUnitsAndTrainsAsOneProcess) {
  // fc1 (544 parameters) and fc2 (528) are units; each block's LayerNorm (32) and gain (16) are
  // 48 >= 40 left unwrapped below it: the block is a unit around its two. The embedding (144)
  // would be one, but its weight is the head's too: it goes to the root, its bias stays.
  matches_one_process(
      FullyShardedOptions().auto_wrap_policy(size_based_wrap_policy(40)),
      {{"embed.bias"},
       {"block0.gain", "block0.ln.weight", "block0.ln.bias"},
       {"block0.fc1.weight", "block0.fc1.bias"},
       {"block0.fc2.weight", "block0.fc2.bias"},
       {"block1.gain", "block1.ln.weight", "block1.ln.bias"},
       {"block1.fc1.weight", "block1.fc1.bias"},
       {"block1.fc2.weight", "block1.fc2.bias"},
       {"scale", "embed.weight"}});
}

TEST(FullyShardedModule, EveryLayerByDefaultWithPrefetchAndWithoutReshardTrainsAsOneProcess) {
  const std::vector<std::set<std::string>> layers = {
      {"embed.bias"},
      {"block0.gain"},
      {"block0.ln.weight", "block0.ln.bias"},
      {"block0.fc1.weight", "block0.fc1.bias"},
      {"block0.fc2.weight", "block0.fc2.bias"},
      {"block1.gain"},
      {"block1.ln.weight", "block1.ln.bias"},
      {"block1.fc1.weight", "block1.fc1.bias"},
      {"block1.fc2.weight", "block1.fc2.bias"},
      {"scale", "embed.weight"}};
  matches_one_process(FullyShardedOptions().prefetch_limit(2), layers);
  matches_one_process(FullyShardedOptions().reshard_after_forward(false), layers);
}

// A block whose forward calls its Linear as fc1->forward(h) skips the hooks that gather fc1's
// unit; the model run without the wrapper finds its root's parameters absent. Each is an error
// naming the parameter (never a computation with something else).
struct BypassingBlock : Block {
  Variable forward(const Variable& x) override { return x + (*fc2)(relu(fc1->forward((*ln)(x)))) * gain; }
};

TEST(FullyShardedModule, ComputingWithAnUngatheredParameterIsAnErrorNamingIt) {
  auto world = dist::world();
  auto model = net();
  model->block1 = std::make_shared<BypassingBlock>();
  model->block1->to(kF64);
  model->replace_module("block1", model->block1);
  FullyShardedDataParallel fsdp(model, world, FullyShardedOptions());
  const Variable x(zeros({2, kIn}, kF64));
  testing::expect_error([&] { fsdp(x); },
                        "tensor holds no values: it is parameter 'block1.fc1.weight' ([32, 16] "
                        "f64) of FullyShardedDataParallel's unit");
  // The units' own hooks still gather them; the root's parameters (the tied embedding weight,
  // the scale) are gathered by the wrapper's forward alone.
  auto unwrapped = net();
  FullyShardedDataParallel other(unwrapped, world, FullyShardedOptions());
  testing::expect_error([&] { (*unwrapped)(x); }, "it is parameter 'embed.weight'");
}

TEST(FullyShardedModule, WrongWrapOptionsAreErrors) {
  auto world = dist::world();
  testing::expect_error([&] { FullyShardedDataParallel(net(), world, FullyShardedOptions().units({0})); },
                        "units() lists 1 children of a Sequential, and this model is a Net");
  testing::expect_error(
      [&] {
        FullyShardedDataParallel(
            net(), world, FullyShardedOptions().auto_wrap_policy(module_wrap_policy<Block>()).wrap_layers(true));
      },
      "auto_wrap_policy and wrap_layers(true) both choose");
}

}  // namespace
}  // namespace dist
}  // namespace tessera
