// ZeRO-1, 2 and 3 with two parameter groups (AdamW: the weights decayed at 0.3 with lr 1e-2, the
// biases not decayed with lr 3e-3; the groups interleave in the flat vector and in each unit)
// against one process running AdamW over the same groups on the whole batch, in f32, on 2 and 3
// ranks: the parameters after 5 steps; the consolidated optimizer state, key by key in the
// groups' numbering (the unsharded optimizer's; not the flat vector's); a resume from the one
// process's checkpoint, of the one process from ZeRO's, and of ZeRO from its own sharded
// checkpoint, each against the uninterrupted run. One group for all would not pass: checked.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/fully_sharded_optimizer_state.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

constexpr int64_t kPerRank = 4;
// f32, 5 AdamW steps: one process's whole-batch mean against the ranks' averaged means.
constexpr double kTolerance = 1e-6;

// Children 0 (204 parameters) and 2 (130) are ZeRO-3 units under min_num_params(100); child 4
// (44) is the root.
std::shared_ptr<nn::Sequential> mlp(uint64_t seed = 17) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(16, 12), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(12, 10), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(10, 4)});
}

// The weights and the biases, each with its options (`grouped` false: all under the first).
std::vector<optim::ParamGroup> groups_of(nn::Module& model, bool grouped = true) {
  std::vector<Variable> weights, biases;
  for (const Variable& p : model.parameters()) (p.dim() == 2 || !grouped ? weights : biases).push_back(p);
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(weights, optim::AdamOptions(1e-2).weight_decay(0.3).clone());
  if (grouped) groups.emplace_back(biases, optim::AdamOptions(3e-3).weight_decay(0.0).clone());
  return groups;
}

zero::GroupedOptimizerFactory adamw() {
  return zero::grouped_factory<optim::AdamW>(optim::AdamOptions(1e-3));
}

// Step `step`'s batch of the whole world, and this rank's part of it.
std::pair<Tensor, Tensor> whole_batch(int step, int world) {
  Generator g(900 + step);
  const Tensor x = randn({kPerRank * world, 16}, kF32, &g);
  const Tensor y = sub(arange(kPerRank * world, kI64), mul(div(arange(kPerRank * world, kI64), 4.0).to(kI64), 4.0)).to(kI64);
  return {x, y};
}

// A model and optimizer under one strategy: stage 0 one process on the whole batch, 1-2
// ZeroRedundancyOptimizer, 3 FullyShardedDataParallel with a GroupedShardOptimizer.
struct Trainer {
  Trainer(int stage, bool grouped = true, uint64_t seed = 17)
      : stage(stage), world(dist::world()), model(mlp(seed)) {
    std::vector<optim::ParamGroup> groups = groups_of(*model, grouped);  // before sharding
    if (stage == 3) {
      fsdp = std::make_unique<FullyShardedDataParallel>(model, world,
                                                        FullyShardedOptions().min_num_params(100));
      opt = std::make_unique<zero::GroupedShardOptimizer>(fsdp->flat_shards(), groups, adamw());
    } else if (stage > 0) {
      opt = std::make_unique<ZeroRedundancyOptimizer>(model->parameters(), groups, world, adamw(),
                                                      ZeroOptions().stage(stage).bucket_cap_mb(0.001));
    } else {
      opt = std::make_unique<optim::AdamW>(groups, optim::AdamOptions(1e-3));
    }
  }
  void train(int from, int to) {
    const int N = world->size(), r = world->rank();
    for (int step = from; step < to; ++step) {
      auto [x, y] = whole_batch(step, N);
      if (stage > 0) {
        x = x.narrow(0, r * kPerRank, kPerRank);
        y = y.narrow(0, r * kPerRank, kPerRank);
      }
      opt->zero_grad();
      const Variable out = fsdp ? fsdp->forward(Variable(x)) : model->forward(Variable(x));
      cross_entropy(out, y).backward();
      opt->step();
    }
  }
  // Copies (a module's state dict shares its parameters' storage). Collective for ZeRO.
  StateDict model_state() {
    StateDict copy;
    for (const auto& [name, t] : fsdp ? fsdp->state_dict() : model->state_dict()) copy.set(name, t.clone());
    return copy;
  }
  StateDict optimizer_state() {
    StateDict copy;
    for (const auto& [name, t] : fsdp ? zero::gather_optimizer_state(*fsdp, *opt) : opt->state_dict()) {
      copy.set(name, t.clone());
    }
    return copy;
  }
  void load(const StateDict& model_state, const StateDict& optimizer_state) {
    if (fsdp) {
      fsdp->load_state_dict(model_state);
      zero::load_optimizer_state(optimizer_state, *fsdp, *opt);
    } else {
      model->load_state_dict(model_state);
      opt->load_state_dict(optimizer_state);
    }
  }
  void save_sharded(const std::string& dir) {
    TrainingProgress p;
    p.step = 3;
    if (fsdp) {
      zero::save_sharded_checkpoint(dir, *fsdp, opt.get(), p);
    } else {
      zero::save_sharded_checkpoint(dir, *model, dynamic_cast<ZeroRedundancyOptimizer&>(*opt), p);
    }
  }
  void load_sharded(const std::string& dir) {
    if (fsdp) {
      zero::load_sharded_checkpoint(dir, *fsdp, opt.get());
    } else {
      zero::load_sharded_checkpoint(dir, *model, opt.get());
    }
  }

  int stage;
  std::shared_ptr<ProcessGroup> world;
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<FullyShardedDataParallel> fsdp;
  std::unique_ptr<optim::Optimizer> opt;
};

// The largest difference over every entry (the same keys and shapes required).
double largest_difference(const StateDict& a, const StateDict& b, const std::string& what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  for (const auto& [name, t] : a) {
    const Tensor* other = b.find(name);
    EXPECT_TRUE(other != nullptr) << what << ": " << name;
    if (other == nullptr) continue;
    EXPECT_EQ(other->shape(), t.shape()) << what << ": " << name;
    if (other->shape() != t.shape()) continue;
    worst = std::max(worst, max_abs_diff(t.to(kF64), other->to(kF64)));
  }
  return worst;
}

std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/zero_groups_" + name;
  auto world = dist::world();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  return dir;
}

class ZeroGroups : public ::testing::TestWithParam<int> {};

TEST_P(ZeroGroups, EqualsOneProcessAdamWOverTheSameGroups) {
  Trainer one(0), sharded(GetParam());
  one.train(0, 5);
  sharded.train(0, 5);
  const double diff = largest_difference(one.model_state(), sharded.model_state(), "parameters");
  if (dist::world()->rank() == 0) {
    std::printf("ZeRO-%d on %d ranks, AdamW over 2 groups, 5 steps: largest difference from one "
                "process %.3g\n", GetParam(), dist::world()->size(), diff);
  }
  EXPECT_LT(diff, kTolerance);
  // The groups matter: one group for all ends elsewhere.
  Trainer ungrouped(GetParam(), /*grouped=*/false);
  ungrouped.train(0, 5);
  EXPECT_GT(largest_difference(one.model_state(), ungrouped.model_state(), "one group"), 1e-4);
}

// ZeRO's consolidated state is the one process's: "state.I" numbers the parameters in the
// groups' order (the weights first, then the biases), not in the flat vector's.
TEST_P(ZeroGroups, ConsolidatedStateIsTheOneProcessStateNumberedByGroups) {
  Trainer one(0), sharded(GetParam());
  one.train(0, 3);
  sharded.train(0, 3);
  const StateDict mine = sharded.optimizer_state();
  EXPECT_EQ(mine.at("state.1.exp_avg").shape(), (Shape{10, 12}));  // the second weight
  EXPECT_EQ(mine.at("state.3.exp_avg").shape(), (Shape{12}));      // the first bias
  EXPECT_EQ(mine.at("param_groups.1.weight_decay").item(), 0.0);
  EXPECT_LT(largest_difference(one.optimizer_state(), mine, "optimizer state"), kTolerance);
}

// Three resumes after 3 of 5 steps, each against the uninterrupted run.
TEST_P(ZeroGroups, ResumesAcrossOneProcessAndItsOwnShardedCheckpoint) {
  const int stage = GetParam();
  Trainer one(0), sharded(stage);
  one.train(0, 3);
  sharded.train(0, 3);
  const StateDict one_model = one.model_state(), one_opt = one.optimizer_state();
  const StateDict zero_model = sharded.model_state(), zero_opt = sharded.optimizer_state();
  const std::string dir = scratch("stage" + std::to_string(stage));
  sharded.save_sharded(dir);
  one.train(3, 5);
  sharded.train(3, 5);
  const StateDict want = one.model_state(), want_sharded = sharded.model_state();

  Trainer from_one(stage, true, /*seed=*/99);  // ZeRO from the one process's checkpoint
  from_one.load(one_model, one_opt);
  from_one.train(3, 5);
  EXPECT_LT(largest_difference(want, from_one.model_state(), "ZeRO from one process"), kTolerance);

  Trainer one_from_zero(0, true, 99);  // one process from ZeRO's consolidated checkpoint
  one_from_zero.load(zero_model, zero_opt);
  one_from_zero.train(3, 5);
  EXPECT_LT(largest_difference(want, one_from_zero.model_state(), "one process from ZeRO"), kTolerance);

  Trainer from_shards(stage, true, 99);  // ZeRO from its sharded checkpoint: the same run
  from_shards.load_sharded(dir);
  from_shards.train(3, 5);
  EXPECT_EQ(largest_difference(want_sharded, from_shards.model_state(), "ZeRO from its shards"), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroGroups, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace dist
}  // namespace tessera
