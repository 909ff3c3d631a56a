// Balances (uniform, by cost, by parameters, by time, explicit) with their errors, the cut of a
// Sequential into stages, and micro-batch sizes and weights.
#include "pipeline/partition.h"

#include <gtest/gtest.h>

#include <functional>

#include "autograd/functions.h"
#include "models/gpt.h"
#include "models/simple.h"
#include "nn/nn.h"
#include "pipeline/balance.h"
#include "pipeline/microbatch.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"
#include "tests/pipeline/mlp.h"

namespace tessera {
namespace pipeline {
namespace {

using testing::expect_error;

// Flatten, Linear(64, 32), ReLU, Linear(32, 32), ReLU, Linear(32, 10).
std::shared_ptr<nn::Sequential> model() { return mlp_of(1, {64, 32, 32, 10}); }

TEST(Balance, UniformGivesEarlierStagesTheExtraLayers) {
  EXPECT_EQ(balance_uniform(10, 3), (std::vector<int>{4, 3, 3}));
  EXPECT_EQ(balance_uniform(8, 4), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(balance_uniform(3, 3), (std::vector<int>{1, 1, 1}));
}

TEST(Balance, ByCostMinimizesTheLargestStage) {
  EXPECT_EQ(balance_by_cost({1, 1, 1, 1}, 2), (std::vector<int>{2, 2}));
  EXPECT_EQ(balance_by_cost({1, 2, 3, 4, 5, 6}, 3), (std::vector<int>{3, 2, 1}));  // 6 | 9 | 6
  EXPECT_EQ(balance_by_cost({1, 1, 1, 10}, 2), (std::vector<int>{3, 1}));
  // Ties (several cuts reach the same largest stage) give the earlier stages more layers.
  EXPECT_EQ(balance_by_cost({8, 1, 1, 1, 1, 4, 4}, 3), (std::vector<int>{1, 5, 1}));
  EXPECT_EQ(balance_by_cost({0, 5, 0, 5, 0}, 2), (std::vector<int>{3, 2}));
}

TEST(Balance, ByParametersCountsEachLayersParameters) {
  // Parameters per layer: 0, 2080, 0, 1056, 0, 330.
  EXPECT_EQ(balance_by_parameters(*model(), 2), (std::vector<int>{3, 3}));
  EXPECT_EQ(balance_by_parameters(*model(), 3), (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(balance_by_cost({0, 2080, 0, 1056, 0, 3000}, 2), (std::vector<int>{5, 1}));
  // The largest stage (2080) alone fixes nothing about the rest: [3, 3, 1, 1] would leave a
  // stage with only a ReLU; the squares pick stages of 2080, 1056, 792, 250.
  EXPECT_EQ(balance_by_cost({0, 2080, 0, 1056, 0, 792, 0, 250}, 4), (std::vector<int>{3, 2, 2, 1}));
}

TEST(Balance, EveryStageKeepsALayerWithParametersWhateverTheCosts) {
  // Layers: ReLU-like (0 params), Linear, ReLU, Linear, ReLU, Linear. A slow ReLU (layer 2,
  // as a noisy timing can make it) would be cut out alone by costs alone: [2, 1, 3].
  const std::vector<double> costs = {0, 1, 100, 1, 0, 1};
  EXPECT_EQ(balance_by_cost(costs, 3), (std::vector<int>{2, 1, 3}));
  // In blocks (a parameterized layer and the parameterless ones after it) it cannot be.
  EXPECT_EQ(balance_with_parameters_in_every_stage(*model(), costs, 3), (std::vector<int>{3, 2, 1}));
  // Fewer blocks than stages: by layers, and Pipe names the stage without parameters.
  EXPECT_EQ(balance_with_parameters_in_every_stage(*model(), costs, 5).size(), 5u);
}

TEST(Balance, ByTimeGivesAValidBalanceAndLeavesTheModelAsItWas) {
  auto m = models::MLP(64, 32, 10);
  auto bn = std::make_shared<nn::Sequential>();
  bn->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 4, 3).padding(1)));
  bn->push_back(std::make_shared<nn::BatchNorm2d>(4));
  bn->push_back(std::make_shared<nn::ReLU>());
  bn->push_back(std::make_shared<nn::Flatten>());
  bn->push_back(std::make_shared<nn::Linear>(4 * 8 * 8, 10));
  StateDict before;
  for (const auto& [name, b] : bn->named_buffers()) before.set(name, b.data().clone());
  Generator g(3);
  const Tensor sample = randn({4, 1, 8, 8}, kF32, &g);
  const std::vector<double> times = profile_layer_times(*bn, sample, 2);
  ASSERT_EQ(times.size(), 5u);
  for (double t : times) EXPECT_GT(t, 0);
  const std::vector<int> balance = balance_by_time(*bn, 3, sample, 1);
  EXPECT_NO_THROW(check_balance(balance, 5));
  for (const auto& [name, b] : bn->named_buffers()) {
    EXPECT_EQ(max_abs_diff(b.data(), before.at(name)), 0) << name << " changed by profiling";
  }
  for (const Variable& p : bn->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Balance, ByTimeGivesBackExistingGradientsBitIdentical) {
  // Gradients accumulate in place: profiling must not add its own backward passes into the
  // gradients a caller already holds (nor their tensors), nor leave one where there was none.
  manual_seed(8);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 4, 3).padding(1)));
  m->push_back(std::make_shared<nn::BatchNorm2d>(4));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(4 * 8 * 8, 10));
  const auto params = m->named_parameters();
  Generator g(9);
  std::vector<Tensor> handles, values;
  for (size_t i = 0; i < params.size(); ++i) {
    const Variable& p = params[i].second;
    if (i + 1 == params.size()) break;  // the last (the Linear's bias) keeps no gradient
    handles.push_back(randn(p.shape(), kF32, &g));
    values.push_back(handles.back().clone());
    p.set_grad(handles.back());
  }
  const Tensor sample = randn({4, 1, 8, 8}, kF32, &g);
  profile_layer_times(*m, sample, 2);
  balance_by_time(*m, 2, sample, 1);
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    const auto& [name, p] = params[i];
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(allclose(p.grad(), values[i], 0, 0)) << name << "'s gradient changed by profiling";
    EXPECT_TRUE(allclose(handles[i], values[i], 0, 0)) << name << "'s gradient tensor written to";
  }
  EXPECT_FALSE(params.back().second.grad().defined()) << params.back().first << " gained a gradient";
}

TEST(Balance, ByTimeProfilesAModelThatTakesTokenIds) {
  // A GPT's first layer looks token ids up: an integer input takes no gradient, the embedding's
  // output does. Every layer is timed, and the weight the output projection reads keeps no
  // gradient of the profiling's.
  manual_seed(4);
  auto gpt = models::GPT(models::GPTConfig::tiny());
  const Tensor tokens = zeros({2, 8}, kI64);
  const std::vector<double> times = profile_layer_times(*gpt, tokens, 1);
  ASSERT_EQ(times.size(), 5u);  // embed, h0, h1, ln_f, lm_head
  for (double t : times) EXPECT_GT(t, 0);
  EXPECT_NO_THROW(check_balance(balance_by_time(*gpt, 2, tokens, 1), 5));
  for (const Variable& p : gpt->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Balance, ErrorsNameTheValues) {
  expect_error([] { check_balance({3, 4, 2}, 10); }, "balance [3, 4, 2] sums to 9 but the model has 10 layers");
  expect_error([] { check_balance({3, 0, 7}, 10); }, "stage 1 gets 0 layers");
  expect_error([] { check_balance({1, 1, 1, 1}, 3); }, "4 stages but the model has only 3 layers");
  expect_error([] { balance_uniform(3, 4); }, "4 stages but the model has only 3 layers");
  expect_error([] { balance_by_cost({1, 2}, 3); }, "3 stages but the model has only 2 layers");
  expect_error([] { parse_balance("3,,4"); }, "'3,,4' is not a list of layer counts");
  expect_error([] { parse_balance("3,-4"); }, "'3,-4' is not a list");
  EXPECT_EQ(parse_balance("3,4,3"), (std::vector<int>{3, 4, 3}));
}

TEST(Balance, SpecIsWhatParseBalanceReads) {
  EXPECT_EQ(balance_spec({5, 4}), "5,4");
  EXPECT_EQ(balance_spec({7}), "7");
  for (const std::vector<int>& b : {std::vector<int>{3, 4, 3}, {1}, {12, 1, 1, 30}}) {
    EXPECT_EQ(parse_balance(balance_spec(b)), b);
  }
}

TEST(Partition, StagesAreSlicesOfTheSameModelUnderTheirOriginalNames) {
  auto m = model();
  const auto stages = partition(*m, {2, 3, 1});
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0]->size(), 2u);
  EXPECT_EQ(stages[2]->size(), 1u);
  EXPECT_EQ(stages[1]->named_parameters()[0].first, "3.weight");
  // Shared, not copied: the stage's parameter is the model's.
  EXPECT_TRUE(stages[2]->parameters()[0].is_same(m->named_parameters()[4].second));
  // Run in order, the stages compute the model.
  Generator g(2);
  const Variable x(randn({3, 1, 8, 8}, kF32, &g));
  Variable h = x;
  for (const auto& s : stages) h = s->forward(h);
  EXPECT_EQ(max_abs_diff(h.data(), m->forward(x).data()), 0);
  expect_error([&] { partition(*m, {2, 2}); }, "sums to 4 but the model has 6 layers");
}

TEST(Partition, InterleavedRanksTakeEveryKthPart) {
  auto m = model();
  const auto parts = partition(*m, balance_uniform(6, 6));
  const auto rank1 = parts_of_rank(parts, 1, 3);
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_EQ(rank1[0]->name_at(0), "1");
  EXPECT_EQ(rank1[1]->name_at(0), "4");
  expect_error([&] { parts_of_rank(parts, 0, 4); }, "6 parts do not divide among 4 ranks");
}

TEST(Microbatch, SizesDifferByAtMostOneAndNeverExceedTheRows) {
  EXPECT_EQ(microbatch_sizes(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(microbatch_sizes(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(microbatch_sizes(3, 4), (std::vector<int64_t>{1, 1, 1}));
  expect_error([] { microbatch_sizes(8, 0); }, "M must be at least 1, got 0");
  expect_error([] { microbatch_sizes(0, 4); }, "the batch has 0 rows");
}

TEST(Microbatch, WeightsAreSharesOfTheBatchSoWeightedMeansAddUpToTheBatchMean) {
  Generator g(4);
  const Tensor x = randn({7, 5}, kF32, &g);
  const Tensor y = arange(7, kI64);
  const auto mbs = split_microbatches(x, y, 3);
  ASSERT_EQ(mbs.size(), 3u);
  EXPECT_DOUBLE_EQ(mbs[0].weight, 3.0 / 7);
  EXPECT_DOUBLE_EQ(mbs[2].weight, 2.0 / 7);
  EXPECT_EQ(mbs[1].target.to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  double weighted = 0;
  for (const auto& mb : mbs) weighted += mean(mb.input).item() * mb.weight;
  EXPECT_NEAR(weighted, mean(x).item(), 1e-6);
  expect_error([&] { split_microbatches(x, arange(6, kI64), 3); }, "the input has 7 rows but the target has shape [6]");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
