// save_training_state / load_training_state from a user's own program (2 ranks): a run saved
// after 2 steps and loaded into freshly built objects (another seed, so nothing is left over)
// continues to step 4 exactly as the uninterrupted run, bit for bit, under DDP with SGD momentum
// and a growing fp16 loss scale, ZeRO-2 with AdamW, and ZeRO-3 (FSDP on a module of our own)
// with AdamW; the random stream and the schedule's epoch come back too. The newest checkpoint
// corrupt: the older one is loaded, and said so. A directory with no checkpoint: nothing, a
// first run. Errors name what is wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/training_state/training_state.h"
#include "dist/zero/auto_wrap_policy.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

struct Net : nn::Module {
  Variable forward(const Variable& x) override { return (*fc2)(relu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1 = register_module<nn::Linear>("fc1", 8, 16);
  std::shared_ptr<nn::Linear> fc2 = register_module<nn::Linear>("fc2", 16, 4);
};

// One training run: its model, optimizer and the step that trains them.
struct Trainer {
  std::shared_ptr<Net> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<FullyShardedDataParallel> fsdp;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::GradScaler> scaler;
  TrainingState state() const {
    TrainingState s;
    if (fsdp) {
      s.fsdp = fsdp.get();
    } else {
      s.model = model.get();
    }
    s.optimizer = optimizer.get();
    s.scaler = scaler.get();
    return s;
  }
  void step(int k) {
    auto world = dist::world();
    Generator g(700 + k);
    const Tensor x = randn({4, 8}, kF32, &g).narrow(0, 2 * world->rank(), 2);
    const Tensor y = arange(4, kI64).narrow(0, 2 * world->rank(), 2);
    // A random draw inside the step: the restored stream must give the same one.
    const Variable noise(randn({2, 8}) * 0.01);
    const Variable in = Variable(x) + noise;
    const Variable out = fsdp ? (*fsdp)(in) : ddp ? (*ddp)(in) : (*model)(in);
    const Variable loss = cross_entropy(out, y);
    optimizer->zero_grad();
    if (scaler) {
      scaler->scale(loss).backward();
      scaler->step(*optimizer);
      scaler->update();
    } else {
      loss.backward();
      optimizer->step();
    }
  }
  StateDict weights() { return fsdp ? fsdp->state_dict() : model->state_dict(); }
};

using Make = std::function<Trainer(uint64_t seed)>;

Trainer ddp_sgd_scaled(uint64_t seed) {
  manual_seed(seed);
  Trainer s;
  s.model = std::make_shared<Net>();
  s.ddp = std::make_unique<DistributedDataParallel>(s.model, dist::world());
  s.optimizer = std::make_unique<optim::SGD>(s.model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  s.scaler = std::make_unique<optim::GradScaler>(
      optim::GradScalerOptions().init_scale(1024).growth_interval(1));  // doubles every step
  return s;
}

Trainer zero2_adamw(uint64_t seed) {
  manual_seed(seed);
  Trainer s;
  s.model = std::make_shared<Net>();
  s.optimizer = std::make_unique<ZeroRedundancyOptimizer>(
      s.model->parameters(), dist::world(),
      zero_factory<optim::AdamW>(optim::AdamWOptions(1e-2).weight_decay(0.1)), ZeroOptions().stage(2));
  return s;
}

Trainer zero3_adamw(uint64_t seed) {
  manual_seed(seed);
  Trainer s;
  s.model = std::make_shared<Net>();
  s.fsdp = std::make_unique<FullyShardedDataParallel>(
      s.model, dist::world(), FullyShardedOptions().auto_wrap_policy(size_based_wrap_policy(100)));
  s.optimizer = std::make_unique<optim::AdamW>(s.fsdp->shard_parameters(),
                                               optim::AdamWOptions(1e-2).weight_decay(0.1));
  return s;
}

// A directory of this test's own, the same on every rank.
std::string test_dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/training_state_" + name;
}

void expect_equal(const StateDict& got, const StateDict& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [name, e] : expected) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_TRUE(allclose(got.at(name), e, 0, 0)) << name;  // bit for bit
  }
}

void resumes_exactly(const Make& make, const std::string& name) {
  auto world = dist::world();
  const std::string dir = test_dir(name);
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();

  Trainer whole = make(1);
  for (int k = 0; k < 4; ++k) whole.step(k);

  Trainer first = make(1);
  for (int k = 0; k < 2; ++k) first.step(k);
  const std::string file =
      save_training_state(dir, first.state(), {/*epoch=*/1, /*step=*/2, default_generator().state()}, *world);
  EXPECT_NE(file.find("/step-00000002/checkpoint.safetensors"), std::string::npos) << file;
  const double scale_at_save = first.scaler ? first.scaler->get_scale() : 0;

  Trainer resumed = make(2);  // another initial model: everything must come from the checkpoint
  manual_seed(99);          // and another random stream
  const std::optional<TrainingProgress> progress = load_training_state(dir, resumed.state(), *world);
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(progress->epoch, 1);
  EXPECT_EQ(progress->step, 2);
  if (resumed.scaler) {
    EXPECT_EQ(resumed.scaler->get_scale(), scale_at_save);
  }
  for (int k = 2; k < 4; ++k) resumed.step(k);
  expect_equal(resumed.weights(), whole.weights());
  if (whole.scaler) {
    EXPECT_EQ(resumed.scaler->get_scale(), whole.scaler->get_scale());
  }
  world->barrier()->wait();
}

TEST(TrainingState, DdpWithSgdAndALossScalerResumesExactly) { resumes_exactly(ddp_sgd_scaled, "ddp"); }
TEST(TrainingState, Zero2WithAdamWResumesExactly) { resumes_exactly(zero2_adamw, "zero2"); }
TEST(TrainingState, FullyShardedWithAdamWResumesExactly) { resumes_exactly(zero3_adamw, "zero3"); }

TEST(TrainingState, ACorruptNewestCheckpointIsPassedOverForTheOlder) {
  auto world = dist::world();
  const std::string dir = test_dir("corrupt");
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  Trainer s = zero2_adamw(1);
  s.step(0);
  save_training_state(dir, s.state(), {1, 1, default_generator().state()}, *world);
  s.step(1);
  const std::string newest = save_training_state(dir, s.state(), {2, 2, default_generator().state()}, *world);
  if (world->rank() == 0) {  // flip a byte near the end: a tensor's data
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-8, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(-8, std::ios::end);
    f.write(&c, 1);
  }
  world->barrier()->wait();
  Trainer t = zero2_adamw(2);
  const auto progress = load_training_state(dir, t.state(), *world);
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(progress->step, 1);
  // Named explicitly, the corrupt one is an error naming it.
  testing::expect_error([&] { load_training_state(newest, t.state(), *world); }, "fails verification");
  world->barrier()->wait();
}

TEST(TrainingState, NoCheckpointYetIsAFirstRunAndBadStatesAreErrors) {
  auto world = dist::world();
  Trainer s = zero2_adamw(1);
  EXPECT_FALSE(load_training_state(test_dir("none-yet"), s.state(), *world).has_value());
  testing::expect_error([&] { save_training_state(test_dir("x"), TrainingState{}, {}, *world); },
                        "give the model or the FullyShardedDataParallel wrapping it");
  TrainingState both = s.state();
  Trainer z = zero3_adamw(1);
  both.fsdp = z.fsdp.get();
  testing::expect_error([&] { load_training_state(test_dir("x"), both, *world); }, "got both");
}

}  // namespace
}  // namespace dist
}  // namespace tessera
