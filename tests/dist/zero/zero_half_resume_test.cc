// ZeRO-1/2 with f16 parameters resumes exactly (issue 29, defect 2). The optimizer's f32 shard is
// the master of f16 parameters; a resume that loads the master but leaves the shard marked "not
// a master yet" lets the next step() copy the f16 parameters over it, rounding every master to
// f16. Checked here: 2 steps, save (sharded, and the consolidated state dict), resume into a
// fresh run, 3 more steps, bit-equal to the 5 uninterrupted steps; for a model whose first
// parameter is f16 and for one whose first parameter stays f32 (BatchNorm first), since masters
// were once looked up under "state.0.master" only.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace zero {
namespace {

constexpr int64_t kPerRank = 3;

// [n, 1, 2, 4] -> (BatchNorm2d(1), f32 under to(kF16)) -> flatten -> Linear(8, 7) -> ReLU ->
// Linear(7, 3), or the same without the BatchNorm; then to(kF16).
std::shared_ptr<nn::Sequential> model(bool batch_norm_first, uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  if (batch_norm_first) m->push_back(std::make_shared<nn::BatchNorm2d>(1));
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(8, 7));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(7, 3));
  m->to(kF16);
  return m;
}

struct Run {
  Run(int stage, bool batch_norm_first, uint64_t seed)
      : net(model(batch_norm_first, seed)),
        opt(net->parameters(), dist::world(),
            zero_factory<optim::Adam>(optim::AdamOptions(0.05)), ZeroOptions().stage(stage)) {}
  void train(int from, int to) {
    auto world = dist::world();
    for (int step = from; step < to; ++step) {
      Generator g(600 + step);
      const Tensor x = randn({kPerRank * world->size(), 1, 2, 4}, kF32, &g)
                           .narrow(0, kPerRank * world->rank(), kPerRank);
      const Tensor y = arange(kPerRank, kI64);
      opt.zero_grad();
      cross_entropy(net->forward(Variable(x.to(kF16))), y).backward();
      opt.step();
    }
  }
  std::shared_ptr<nn::Sequential> net;
  ZeroRedundancyOptimizer opt;
};

std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/zero_half_" + name;
  auto world = dist::world();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  return dir;
}

// Bit-equal parameters, buffers and optimizer state (masters included). Buffers (BatchNorm's
// running statistics) are each rank's own and a checkpoint keeps rank 0's, so they are compared
// on rank 0 only.
void expect_same(Run& a, Run& b, const std::string& what) {
  const StateDict theirs = b.net->state_dict();
  std::set<std::string> buffers;
  for (const auto& [name, t] : a.net->named_buffers()) buffers.insert(name);
  for (const auto& [name, t] : a.net->state_dict()) {
    if (buffers.count(name) != 0 && dist::world()->rank() != 0) continue;
    EXPECT_TRUE(allclose(t.to(kF64), theirs.at(name).to(kF64), 0, 0)) << what << ": " << name;
  }
  const StateDict sa = a.opt.state_dict(), sb = b.opt.state_dict();  // collective
  ASSERT_EQ(sa.size(), sb.size()) << what;
  for (const auto& [name, t] : sa) {
    if (name.rfind("param_groups.", 0) == 0) continue;
    EXPECT_TRUE(allclose(t.to(kF64), sb.at(name).to(kF64), 0, 0)) << what << ": " << name;
  }
}

void resumes_exactly(int stage, bool batch_norm_first) {
  const std::string what = "stage " + std::to_string(stage) +
                           (batch_norm_first ? ", f32 first parameter" : ", f16 first parameter");
  Run uninterrupted(stage, batch_norm_first, 31);
  uninterrupted.train(0, 5);

  Run writer(stage, batch_norm_first, 31);
  writer.train(0, 2);
  const std::string dir = scratch(std::to_string(stage) + (batch_norm_first ? "_bn" : ""));
  TrainingProgress progress;
  progress.step = 2;
  save_sharded_checkpoint(dir, *writer.net, writer.opt, progress);
  const StateDict consolidated = writer.opt.state_dict();  // collective
  const StateDict weights = writer.net->state_dict();
  // BatchNorm holds parameters 0 and 1 (weight, bias), f32: the first master is 2's.
  ASSERT_TRUE(consolidated.contains(batch_norm_first ? "state.2.master" : "state.0.master"));
  EXPECT_EQ(consolidated.contains("state.0.master"), !batch_norm_first);

  Run sharded(stage, batch_norm_first, 77);  // another initial model: everything comes from the file
  load_sharded_checkpoint(dir, *sharded.net, &sharded.opt);
  sharded.train(2, 5);
  expect_same(uninterrupted, sharded, what + ", sharded checkpoint");

  Run consolidated_run(stage, batch_norm_first, 77);
  consolidated_run.net->load_state_dict(weights);
  consolidated_run.opt.load_state_dict(consolidated);
  consolidated_run.train(2, 5);
  expect_same(uninterrupted, consolidated_run, what + ", consolidated state dict");
}

TEST(ZeroHalfResume, Stage1F16FirstParameter) { resumes_exactly(1, false); }
TEST(ZeroHalfResume, Stage2F16FirstParameter) { resumes_exactly(2, false); }
TEST(ZeroHalfResume, Stage1F32FirstParameter) { resumes_exactly(1, true); }
TEST(ZeroHalfResume, Stage2F32FirstParameter) { resumes_exactly(2, true); }

}  // namespace
}  // namespace zero
}  // namespace dist
}  // namespace tessera
