// ZeRO-3 with a weight tied across two units (a token embedding read again by the output
// projection, as GPT-2's lm_head reads wte), on 2 and 3 ranks: the wrap policy finds the tie in
// the module tree and puts the weight in the root unit, which spans both users; ZeRO-3 then
// equals one process on the whole batch under every wrap policy (AdamW, f32), the tied
// weight's gradient is the sum of its two uses and is reduce-scattered once (one reduce-scatter
// per unit and step), under bf16 mixed precision it equals one process with bf16 parameters and
// f32 masters under the same autocast; a layer registered in two children lives in the root
// too; and a unit of shared parameters only, or a tie to a parameter outside the model, is an
// error.
#include <gtest/gtest.h>

#include <cstdio>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "nn/activation.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kVocab = 11, kWidth = 6, kTime = 5, kPerRank = 3;

// Token and position embeddings (the token one is tied to the head; the position one is the
// child's own).
struct Embed : nn::Module {
  Variable forward(const Variable& idx) override {
    const Tensor positions = arange(idx.shape()[1], TensorOptions(kI64));
    return add((*tok)(idx), (*pos)(Variable(positions)));
  }
  std::shared_ptr<nn::Embedding> tok = register_module<nn::Embedding>("tok", kVocab, kWidth);
  std::shared_ptr<nn::Embedding> pos = register_module<nn::Embedding>("pos", kTime, kWidth);
};

// logits = x tok^T: no parameter of its own, the tie registered.
struct TiedHead : nn::Module {
  explicit TiedHead(const Variable& w) : weight(register_tied_parameter("weight", w)) {}
  Variable forward(const Variable& x) override { return linear(x, weight, Variable()); }
  Variable weight;
};

// embed, Linear, Tanh, Linear, head: the token embedding's users are children 0 and 4. With
// `untied`, the head reads a copy of it (same values) of its own, outside the model.
std::shared_ptr<nn::Sequential> tied_model(uint64_t seed = 41, Variable* untied = nullptr) {
  manual_seed(seed);
  auto embed = std::make_shared<Embed>();
  auto m = std::make_shared<nn::Sequential>();
  m->push_back("embed", embed);
  m->push_back("fc1", std::make_shared<nn::Linear>(kWidth, kWidth));
  m->push_back("act", std::make_shared<nn::Tanh>());
  m->push_back("fc2", std::make_shared<nn::Linear>(kWidth, kWidth));
  if (untied != nullptr) *untied = Variable(embed->tok->weight().data().clone(), true);
  m->push_back("head", std::make_shared<TiedHead>(untied != nullptr ? *untied : embed->tok->weight()));
  return m;
}

// Step `step`'s token windows [B, T] and next-token targets for the whole world.
std::pair<Tensor, Tensor> whole_batch(int step, int world) {
  Generator g(300 + step);
  const Tensor tokens = mul(rand({kPerRank * world, kTime + 1}, kF32, &g), kVocab - 0.01).to(kI64);
  return {tokens.narrow(1, 0, kTime).contiguous(), tokens.narrow(1, 1, kTime).contiguous()};
}

Variable loss_of(const Variable& logits, const Tensor& targets) {
  return cross_entropy(reshape(logits, {-1, kVocab}), targets.reshape({-1}));
}

std::unique_ptr<optim::AdamW> adamw(std::vector<Variable> params) {
  return std::make_unique<optim::AdamW>(params, optim::AdamOptions(1e-2).weight_decay(0.1));
}

// ZeRO-3 under `options` and one process on the whole batch, 4 AdamW steps; the largest
// parameter difference.
double against_one_process(const FullyShardedOptions& options) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto one = tied_model();
  auto one_opt = adamw(one->parameters());
  FullyShardedDataParallel fsdp(tied_model(), world, options);
  auto opt = adamw(fsdp.shard_parameters());
  for (int step = 0; step < 4; ++step) {
    const auto [x, y] = whole_batch(step, N);
    one_opt->zero_grad();
    loss_of((*one)(Variable(x)), y).backward();
    one_opt->step();
    opt->zero_grad();
    const Tensor mine_x = x.narrow(0, r * kPerRank, kPerRank), mine_y = y.narrow(0, r * kPerRank, kPerRank);
    loss_of(fsdp.forward(Variable(mine_x)), mine_y).backward();
    opt->step();
  }
  const StateDict sharded = fsdp.state_dict();
  double worst = 0;
  for (const auto& [name, p] : one->named_parameters()) {
    worst = std::max(worst, max_abs_diff(sharded.at(name), p.data()));
  }
  EXPECT_EQ(sharded.size(), one->state_dict().size());  // no second copy of the tied weight
  return worst;
}

TEST(FullyShardedTied, TheTiedWeightGoesToTheRootSpanningBothUsers) {
  auto world = dist::world();
  FullyShardedDataParallel fsdp(tied_model(), world, FullyShardedOptions().min_num_params(1));
  // Units: embed (its position embedding), fc1, fc2; the root holds the token embedding and
  // spans from embed to head.
  ASSERT_EQ(fsdp.units().size(), 4u);
  EXPECT_EQ(fsdp.units()[0]->params().size(), 1u);
  EXPECT_EQ(fsdp.units()[0]->params()[0].first, "embed.pos.weight");
  EXPECT_EQ(fsdp.units()[3]->name(), "root");
  ASSERT_EQ(fsdp.units()[3]->params().size(), 1u);
  EXPECT_EQ(fsdp.units()[3]->params()[0].first, "embed.tok.weight");
  EXPECT_EQ(fsdp.unit_children()[3], (std::vector<size_t>{0, 4}));
  // Every layer a unit: the same root; the tied head has nothing of its own.
  FullyShardedDataParallel layers(tied_model(), world, FullyShardedOptions().wrap_layers(true));
  EXPECT_EQ(layers.units().back()->name(), "root");
  EXPECT_EQ(layers.units().back()->params()[0].first, "embed.tok.weight");
  EXPECT_EQ(layers.units().size(), 4u);  // pos, fc1, fc2, root
}

TEST(FullyShardedTied, EqualsOneProcessUnderEveryWrapPolicy) {
  const double by_size = against_one_process(FullyShardedOptions().min_num_params(1));
  const double listed = against_one_process(FullyShardedOptions().units({1, 3}));
  const double layers = against_one_process(FullyShardedOptions().wrap_layers(true));
  const double prefetch = against_one_process(FullyShardedOptions().min_num_params(1).prefetch_limit(1));
  if (dist::world()->rank() == 0) {
    std::printf("ZeRO-3 with a tied weight on %d ranks, 4 AdamW steps: largest difference from one "
                "process %.3g (by size), %.3g (units {1, 3}), %.3g (every layer), %.3g (prefetch)\n",
                dist::world()->size(), by_size, listed, layers, prefetch);
  }
  for (double d : {by_size, listed, layers, prefetch}) EXPECT_LT(d, 1e-6);
}

// The tied weight's gradient: the lookup's rows plus the projection's, averaged over the
// ranks, reduce-scattered once with the root's (one reduce-scatter per unit in the step).
TEST(FullyShardedTied, TheTiedGradientIsTheSumOfBothUsesReduceScatteredOnce) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto one = tied_model();
  FullyShardedDataParallel fsdp(tied_model(), world, FullyShardedOptions().min_num_params(1));
  const auto [x, y] = whole_batch(0, N);
  loss_of((*one)(Variable(x)), y).backward();
  world->ledger().reset();
  loss_of(fsdp.forward(Variable(x.narrow(0, r * kPerRank, kPerRank))), y.narrow(0, r * kPerRank, kPerRank))
      .backward();
  EXPECT_EQ(world->ledger().entry(CollectiveKind::kReduceScatter).calls,
            static_cast<int64_t>(fsdp.units().size()));
  const FlatParameter& root = *fsdp.units().back();
  const Tensor whole = one->named_parameters()[0].second.grad();  // embed.tok.weight: both uses
  const Tensor padded = cat({whole.reshape({-1}), zeros({root.padded_numel() - root.numel()}, kF32)}, 0);
  EXPECT_LT(max_abs_diff(root.shard().grad(), padded.narrow(0, r * root.shard_numel(), root.shard_numel())),
            1e-7);
  // The same model with the head on a copy of the weight: the lookup's gradient and the
  // projection's apart. The tied one is their sum, and neither alone.
  Variable head_copy;
  auto untied = tied_model(41, &head_copy);
  loss_of((*untied)(Variable(x)), y).backward();
  const Tensor lookup = untied->named_parameters()[0].second.grad();
  EXPECT_LT(max_abs_diff(whole, add(lookup, head_copy.grad())), 1e-7);
  EXPECT_GT(max_abs_diff(whole, lookup), 1e-3);
  EXPECT_GT(max_abs_diff(whole, head_copy.grad()), 1e-3);
}

// Mixed precision: the root is gathered in bf16 and both uses compute with it, as one process
// does with bf16 parameters (f32 masters in its optimizer) under the same autocast. The tied
// gradient (bf16 sums of both uses, averaged in f32) equals that process's to bf16 rounding, and
// SGD steps of the f32 master shards stay with its masters.
TEST(FullyShardedTied, UnderBf16MixedPrecisionEqualsBf16ParametersWithF32Masters) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  // Values bf16 holds exactly, so that both masters start alike (the one process's is made
  // from its bf16 parameters at the first step).
  auto bf16_exact = [] {
    auto m = tied_model();
    m->to(kBF16);
    m->to(kF32);
    return m;
  };
  auto one = bf16_exact();
  one->to(kBF16);
  optim::SGD one_opt(one->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  FullyShardedDataParallel fsdp(
      bf16_exact(), world,
      FullyShardedOptions().min_num_params(1).mixed_precision(MixedPrecision().param_dtype(kBF16).reduce_dtype(kF32)));
  optim::SGD opt(fsdp.shard_parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const auto [x, y] = whole_batch(step, N);
    one_opt.zero_grad();
    opt.zero_grad();
    Variable a, b;
    {
      AutocastGuard guard(kBF16);
      a = loss_of((*one)(Variable(x)), y);
      b = loss_of(fsdp.forward(Variable(x.narrow(0, r * kPerRank, kPerRank))), y.narrow(0, r * kPerRank, kPerRank));
    }
    a.backward();
    b.backward();
    if (step == 0) {
      const FlatParameter& root = *fsdp.units().back();
      const Tensor whole = one->named_parameters()[0].second.grad().to(kF32).reshape({-1});
      const Tensor padded = cat({whole, zeros({root.padded_numel() - root.numel()}, kF32)}, 0);
      const double scale = max_abs_diff(whole, zeros(whole.shape(), kF32));
      EXPECT_EQ(root.shard().grad().dtype(), kF32);
      EXPECT_LT(max_abs_diff(root.shard().grad(), padded.narrow(0, r * root.shard_numel(), root.shard_numel())),
                1e-2 * scale);
    }
    one_opt.step();
    opt.step();
  }
  const StateDict sharded = fsdp.state_dict();
  const StateDict masters = one_opt.state_dict();
  double worst = 0;
  const auto named = one->named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(sharded.at(named[i].first).dtype(), kF32) << named[i].first;
    worst = std::max(worst, max_abs_diff(sharded.at(named[i].first), masters.at(optim::state_key(i, "master"))));
  }
  if (r == 0) {
    std::printf("ZeRO-3 bf16 mixed precision with a tied weight against bf16 parameters with f32 "
                "masters, 3 SGD steps: largest difference %.3g\n", worst);
  }
  // The gradients are rounded to bf16 per rank here and per batch there: the one process fed
  // the same batch in halves differs from itself by ~2e-4 after these steps, against steps that
  // move the parameters by 1e-2 to 6e-2 (a lost use of the tied weight would show at that size).
  EXPECT_LT(worst, 5e-4);
}

// The same rule for a module registered in two children (a layer applied twice): its
// parameters go to the root, which spans both; a child between them stays a unit of its own.
TEST(FullyShardedTied, ALayerRegisteredInTwoChildrenLivesInTheRoot) {
  auto world = dist::world();
  const int N = world->size(), r = world->rank();
  auto make = [] {
    manual_seed(9);
    auto shared = std::make_shared<nn::Linear>(kWidth, kWidth);
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        shared, std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(kWidth, kWidth),
        std::make_shared<nn::Tanh>(), shared});
  };
  auto one = make();
  auto one_opt = adamw(one->parameters());
  FullyShardedDataParallel fsdp(make(), world, FullyShardedOptions().min_num_params(1));
  ASSERT_EQ(fsdp.units().size(), 2u);  // child 2, and the root with the shared layer
  EXPECT_EQ(fsdp.units()[1]->name(), "root");
  EXPECT_EQ(fsdp.unit_children()[1], (std::vector<size_t>{0, 4}));
  auto opt = adamw(fsdp.shard_parameters());
  for (int step = 0; step < 3; ++step) {
    Generator g(60 + step);
    const Tensor x = randn({kPerRank * N, kWidth}, kF32, &g);
    one_opt->zero_grad();
    sum(square((*one)(Variable(x)))).backward();
    one_opt->step();
    opt->zero_grad();
    // The whole batch's sum is the ranks' sums added: each rank's times N, as averaged.
    mul(sum(square(fsdp.forward(Variable(x.narrow(0, r * kPerRank, kPerRank))))), double(N)).backward();
    opt->step();
  }
  const StateDict sharded = fsdp.state_dict();
  double worst = 0;
  for (const auto& [name, p] : one->named_parameters()) worst = std::max(worst, max_abs_diff(sharded.at(name), p.data()));
  EXPECT_LT(worst, 1e-6);
}

TEST(FullyShardedTied, AUnitOfSharedParametersOnlyOrAForeignTieIsAnError) {
  auto world = dist::world();
  // A plain embedding as child 0 holds nothing but the tied weight: it cannot be a unit.
  manual_seed(3);
  auto tok = std::make_shared<nn::Embedding>(kVocab, kWidth);
  auto plain = std::make_shared<nn::Sequential>();
  plain->push_back("tok", tok);
  plain->push_back("fc", std::make_shared<nn::Linear>(kWidth, kWidth));
  plain->push_back("head", std::make_shared<TiedHead>(tok->weight()));
  testing::expect_error(
      [&] { FullyShardedDataParallel wrapped(plain, world, FullyShardedOptions().units({0})); },
      "child 0 (Embedding) cannot be a unit: every parameter it holds is shared");
  // A tie to a parameter no module of the model registers.
  auto stray = std::make_shared<nn::Embedding>(kVocab, kWidth);
  auto foreign = std::make_shared<nn::Sequential>();
  foreign->push_back("fc", std::make_shared<nn::Linear>(kWidth, kWidth));
  foreign->push_back("head", std::make_shared<TiedHead>(stray->weight()));
  testing::expect_error([&] { FullyShardedDataParallel wrapped(foreign, world); },
                        "head.weight is tied to a parameter that no module of the model registers");
}

}  // namespace
}  // namespace dist
}  // namespace tessera
