// What zero_param_groups_test.cc and zero_gpt_test.cc share: a model trained under one strategy
// with parameter groups (stage 0: one process on the whole batch; kDdp: DDP, the optimizer
// over the groups; 1-2: ZeroRedundancyOptimizer; 3: FullyShardedDataParallel with a
// GroupedShardOptimizer), its states as checkpoints hold them, its resumes, and the comparison
// of two state dicts.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/fully_sharded_optimizer_state.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace grouped_test {

struct Recipe {
  // The model (a fresh one per call, every rank alike) and its groups, read before sharding.
  std::function<std::shared_ptr<nn::Sequential>(uint64_t seed)> model;
  std::function<std::vector<optim::ParamGroup>(nn::Module& model)> groups;
  zero::GroupedOptimizerFactory optimizer;
  FullyShardedOptions units;
  // Step `step`'s batch of the whole world (rows split evenly over the ranks), and its loss.
  std::function<std::pair<Tensor, Tensor>(int step, int world)> batch;
  std::function<Variable(const Variable& output, const Tensor& targets)> loss;
};

constexpr int kDdp = -1;

struct Trainer {
  Trainer(const Recipe& setup, int stage, uint64_t seed)
      : setup(setup), stage(stage), world(dist::world()), model(setup.model(seed)) {
    std::vector<optim::ParamGroup> groups = setup.groups(*model);
    if (stage == kDdp) {
      ddp = std::make_unique<DistributedDataParallel>(model, world);
      opt = setup.optimizer(groups);
    } else if (stage == 3) {
      fsdp = std::make_unique<FullyShardedDataParallel>(model, world, setup.units);
      opt = std::make_unique<zero::GroupedShardOptimizer>(fsdp->flat_shards(), groups, setup.optimizer);
    } else if (stage > 0) {
      opt = std::make_unique<ZeroRedundancyOptimizer>(
          model->parameters(), groups, world, setup.optimizer,
          ZeroOptions().stage(stage).bucket_cap_mb(0.001));  // several buckets in stage 2
    } else {
      opt = setup.optimizer(groups);
    }
  }
  void train(int from, int to) {
    const int N = world->size(), r = world->rank();
    for (int step = from; step < to; ++step) {
      auto [x, y] = setup.batch(step, N);
      if (stage != 0) {
        const int64_t rows = x.shape()[0] / N;
        x = x.narrow(0, r * rows, rows);
        y = y.narrow(0, r * rows, rows);
      }
      opt->zero_grad();
      const Variable out = fsdp  ? fsdp->forward(Variable(x))
                           : ddp ? ddp->forward(Variable(x))
                                 : model->forward(Variable(x));
      setup.loss(out, y).backward();
      opt->step();
    }
  }
  // Copies (a module's state dict shares its parameters' storage). Collective for ZeRO.
  StateDict model_state() {
    StateDict copy;
    for (const auto& [name, t] : fsdp ? fsdp->state_dict() : model->state_dict()) copy.set(name, t.clone());
    return copy;
  }
  // The unsplit model's format (ZeRO-3's gathered).
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
  void save_sharded(const std::string& dir, int64_t step) {
    TrainingProgress p;
    p.step = step;
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

  const Recipe& setup;
  int stage;
  std::shared_ptr<ProcessGroup> world;
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<FullyShardedDataParallel> fsdp;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> opt;
};

// The largest difference over every entry (the same keys and shapes required).
inline double largest_difference(const StateDict& a, const StateDict& b, const std::string& what) {
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

// A fresh directory shared by the ranks (the same TEST_TMPDIR on one machine).
inline std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/zero_groups_" + name;
  auto world = dist::world();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  return dir;
}

// After 3 of 5 steps, three resumes against the uninterrupted runs: the strategy from the one
// process's checkpoint, the one process from the strategy's (consolidated), and the strategy
// from its own sharded checkpoint (bit for bit).
inline void resumes_across_one_process_and_shards(const Recipe& setup, int stage, double tolerance) {
  Trainer one(setup, 0, 1), sharded(setup, stage, 1);
  one.train(0, 3);
  sharded.train(0, 3);
  const StateDict one_model = one.model_state(), one_opt = one.optimizer_state();
  const StateDict zero_model = sharded.model_state(), zero_opt = sharded.optimizer_state();
  const std::string dir = scratch("stage" + std::to_string(stage));
  sharded.save_sharded(dir, 3);
  one.train(3, 5);
  sharded.train(3, 5);
  const StateDict want = one.model_state(), want_sharded = sharded.model_state();

  Trainer from_one(setup, stage, 2);  // another seed: everything comes from the checkpoint
  from_one.load(one_model, one_opt);
  from_one.train(3, 5);
  EXPECT_LT(largest_difference(want, from_one.model_state(), "ZeRO from one process"), tolerance);

  Trainer one_from_zero(setup, 0, 2);
  one_from_zero.load(zero_model, zero_opt);
  one_from_zero.train(3, 5);
  EXPECT_LT(largest_difference(want, one_from_zero.model_state(), "one process from ZeRO"), tolerance);

  Trainer from_shards(setup, stage, 2);
  from_shards.load_sharded(dir);
  from_shards.train(3, 5);
  EXPECT_EQ(largest_difference(want_sharded, from_shards.model_state(), "ZeRO from its shards"), 0.0);
}

}  // namespace grouped_test
}  // namespace dist
}  // namespace tessera
