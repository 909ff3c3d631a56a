// ZeRO-1, 2 and 3 with two parameter groups (AdamW: the weights decayed at 0.3 with lr 1e-2, the
// biases not decayed with lr 3e-3; the groups interleave in the flat vector and in each unit)
// against one process running AdamW over the same groups on the whole batch, in f32, on 2 and 3
// ranks: the parameters after 5 steps; the consolidated optimizer state, key by key in the
// groups' numbering (the unsharded optimizer's; not the flat vector's); a resume from the one
// process's checkpoint, of the one process from ZeRO's, and of ZeRO from its own sharded
// checkpoint, each against the uninterrupted run. One group for all would not pass: checked.
#include <gtest/gtest.h>

#include <cstdio>

#include "autograd/functions.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "tensor/random.h"
#include "tests/dist/zero/grouped_trainer.h"

namespace tessera {
namespace dist {
namespace grouped_test {
namespace {

constexpr int64_t kPerRank = 4;
// f32, 5 AdamW steps: one process's whole-batch mean against the ranks' averaged means.
constexpr double kTolerance = 1e-6;

// Children 0 (204 parameters) and 2 (130) are ZeRO-3 units under min_num_params(100); child 4
// (44) is the root.
std::shared_ptr<nn::Sequential> mlp(uint64_t seed) {
  manual_seed(16 + seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 12), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(12, 10), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(10, 4)});
}

// The weights and the biases, each with its options (`grouped` false: all under the first).
std::vector<optim::ParamGroup> groups_of(nn::Module& model, bool grouped) {
  std::vector<Variable> weights, biases;
  for (const Variable& p : model.parameters()) (p.dim() == 2 || !grouped ? weights : biases).push_back(p);
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(weights, optim::AdamOptions(1e-2).weight_decay(0.3).clone());
  if (grouped) groups.emplace_back(biases, optim::AdamOptions(3e-3).weight_decay(0.0).clone());
  return groups;
}

Recipe setup(bool grouped = true) {
  Recipe s;
  s.model = mlp;
  s.groups = [grouped](nn::Module& m) { return groups_of(m, grouped); };
  s.optimizer = zero::grouped_factory<optim::AdamW>(optim::AdamOptions(1e-3));
  s.units = FullyShardedOptions().min_num_params(100);
  s.batch = [](int step, int world) {
    Generator g(900 + step);
    const Tensor x = randn({kPerRank * world, 16}, kF32, &g);
    const Tensor i = arange(kPerRank * world, kI64);
    const Tensor y = sub(i, mul(div(i, 4.0).to(kI64), 4.0)).to(kI64);
    return std::make_pair(x, y);
  };
  s.loss = [](const Variable& out, const Tensor& y) { return cross_entropy(out, y); };
  return s;
}

class ZeroGroups : public ::testing::TestWithParam<int> {};

TEST_P(ZeroGroups, EqualsOneProcessAdamWOverTheSameGroups) {
  const Recipe grouped = setup();
  Trainer one(grouped, 0, 1), sharded(grouped, GetParam(), 1);
  one.train(0, 5);
  sharded.train(0, 5);
  const double diff = largest_difference(one.model_state(), sharded.model_state(), "parameters");
  if (dist::world()->rank() == 0) {
    std::printf("ZeRO-%d on %d ranks, AdamW over 2 groups, 5 steps: largest difference from one "
                "process %.3g\n", GetParam(), dist::world()->size(), diff);
  }
  EXPECT_LT(diff, kTolerance);
  // The groups matter: one group for all ends elsewhere.
  const Recipe one_group = setup(/*grouped=*/false);
  Trainer ungrouped(one_group, GetParam(), 1);
  ungrouped.train(0, 5);
  EXPECT_GT(largest_difference(one.model_state(), ungrouped.model_state(), "one group"), 1e-4);
}

// ZeRO's consolidated state is the one process's: "state.I" numbers the parameters in the
// groups' order (the weights first, then the biases), not in the flat vector's.
TEST_P(ZeroGroups, ConsolidatedStateIsTheOneProcessStateNumberedByGroups) {
  const Recipe grouped = setup();
  Trainer one(grouped, 0, 1), sharded(grouped, GetParam(), 1);
  one.train(0, 3);
  sharded.train(0, 3);
  const StateDict mine = sharded.optimizer_state();
  EXPECT_EQ(mine.at("state.1.exp_avg").shape(), (Shape{10, 12}));  // the second weight
  EXPECT_EQ(mine.at("state.3.exp_avg").shape(), (Shape{12}));      // the first bias
  EXPECT_EQ(mine.at("param_groups.1.weight_decay").item(), 0.0);
  EXPECT_LT(largest_difference(one.optimizer_state(), mine, "optimizer state"), kTolerance);
}

TEST_P(ZeroGroups, ResumesAcrossOneProcessAndItsOwnShardedCheckpoint) {
  resumes_across_one_process_and_shards(setup(), GetParam(), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroGroups, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace grouped_test
}  // namespace dist
}  // namespace tessera
