// Tensor parallelism inside data parallelism (T = 2 tensor-parallel ranks x D = world / 2
// replicas) against one process training the same model on the whole batch: equal full
// parameters after 3 steps (f64, 1e-10), for the Megatron MLP block under DDP and for a
// class-parallel head under ZeRO-1; the Topology's groups; and a checkpoint that moves from the
// tensor-parallel run into a single-process model.
#include <gtest/gtest.h>

#include <functional>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/topology.h"
#include "dist/zero/zero_optimizer.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

constexpr int64_t kPerReplica = 4, kIn = 12, kHidden = 9, kClasses = 7;
constexpr int kSteps = 3;

struct Batch {
  Tensor x, y;
};

// The same global batch on every rank, different for every step.
Batch global_batch(int step, int replicas) {
  Generator g(500 + step);
  const int64_t n = kPerReplica * replicas;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) y.push_back((i * 3 + step) % kClasses);
  return {randn({n, kIn}, kF64, &g), from_vector<int64_t>(y, {n})};
}

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(21);
  auto m = models::MLP(kIn, kHidden, kClasses);
  m->to(kF64);
  return m;
}

optim::SGDOptions sgd_options() { return optim::SGDOptions(0.1).momentum(0.9); }

// One process, the whole batch: the reference.
StateDict train_single(int replicas) {
  auto model = mlp();
  optim::SGD opt(model->parameters(), sgd_options());
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = global_batch(step, replicas);
    opt.zero_grad();
    cross_entropy(model->forward(Variable(b.x)), b.y).backward();
    opt.step();
  }
  return model->state_dict();
}

// kSteps steps on replica d's rows of each global batch (both tensor-parallel ranks of the
// replica see the same rows), with `loss` of the model's output.
void train_replica(const Topology& topo, nn::Module& forward_module, optim::Optimizer& opt,
                   const std::function<Variable(const Variable&, const Tensor&)>& loss) {
  const int D = topo.data_parallel_size(), d = topo.replica();
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = global_batch(step, D);
    const Tensor x = b.x.narrow(0, d * kPerReplica, kPerReplica);
    const Tensor y = b.y.narrow(0, d * kPerReplica, kPerReplica);
    opt.zero_grad();
    loss(forward_module.forward(Variable(x)), y).backward();
    opt.step();
  }
}

void expect_same_state(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : b) {
    ASSERT_TRUE(a.contains(name)) << name;
    EXPECT_LT(max_abs_diff(a.at(name), t), 1e-10) << name;
  }
}

TEST(TensorTimesDataParallel, TopologyGroups) {
  auto world = dist::world();
  const int N = world->size();
  if (N % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  Topology topo(world, 1, 2);
  EXPECT_EQ(topo.tensor_parallel_size(), 2);
  EXPECT_EQ(topo.data_parallel_size(), N / 2);
  EXPECT_EQ(topo.tensor_parallel_rank(), world->rank() % 2);
  EXPECT_EQ(topo.replica(), world->rank() / 2);
  // Tensor-parallel groups are neighbours {0, 1}, {2, 3}; data-parallel groups {0, 2}, {1, 3}.
  EXPECT_EQ(topo.tensor_parallel_group()->world_ranks(),
            (std::vector<int>{2 * topo.replica(), 2 * topo.replica() + 1}));
  std::vector<int> dp;
  for (int d = 0; d < N / 2; ++d) dp.push_back(2 * d + topo.tensor_parallel_rank());
  EXPECT_EQ(topo.data_parallel_group()->world_ranks(), dp);
}

// 4 ranks as 2 pipeline stages x 2 tensor-parallel ranks (D = 1): rank = stage * 2 + tp_rank.
TEST(TensorTimesDataParallel, TopologyWithStagesAndTensorParallelGroups) {
  auto world = dist::world();
  if (world->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  Topology topo(world, 2, 2);
  const int r = world->rank();
  EXPECT_EQ(topo.stage(), r / 2);
  EXPECT_EQ(topo.tensor_parallel_rank(), r % 2);
  EXPECT_EQ(topo.data_parallel_size(), 1);
  EXPECT_EQ(topo.tensor_parallel_group()->world_ranks(), (std::vector<int>{r / 2 * 2, r / 2 * 2 + 1}));
  EXPECT_EQ(topo.pipeline_group()->world_ranks(), (std::vector<int>{r % 2, 2 + r % 2}));
  EXPECT_EQ(topo.data_parallel_group()->world_ranks(), (std::vector<int>{r}));
}

TEST(TensorTimesDataParallel, MegatronMLPUnderDDPEqualsOneProcess) {
  auto world = dist::world();
  if (world->size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  Topology topo(world, 1, 2);
  auto model = mlp();
  parallelize_module(*model, topo.tensor_parallel_group(),
                     {{"fc1", Style::kColumnwise}, {"fc2", Style::kRowwise}});
  DistributedDataParallel ddp(model, topo.data_parallel_group());
  optim::SGD opt(ddp.parameters(), sgd_options());
  train_replica(topo, ddp, opt, [](const Variable& out, const Tensor& y) {
    return cross_entropy(out, y);
  });
  expect_same_state(model->state_dict(), train_single(topo.data_parallel_size()));
}

TEST(TensorTimesDataParallel, ClassParallelHeadUnderZero1EqualsOneProcess) {
  auto world = dist::world();
  if (world->size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  Topology topo(world, 1, 2);
  const int D = topo.data_parallel_size();
  auto model = mlp();
  const auto head = std::dynamic_pointer_cast<ColumnParallelLinear>(
      parallelize_module(*model, topo.tensor_parallel_group(),
                         {{last_linear_name(*model), Style::kClassParallelHead}})[0]);
  ClassParallelCrossEntropy loss_fn(topo.tensor_parallel_group(), head->output_slice(),
                                    head->out_features());
  ZeroRedundancyOptimizer opt(model->parameters(), topo.data_parallel_group(),
                              zero_factory<optim::SGD>(sgd_options()));
  train_replica(topo, *model, opt, loss_fn);
  const StateDict state = model->state_dict();
  expect_same_state(state, train_single(D));

  // The tensor-parallel run's checkpoint is an ordinary model's, and loads back into a fresh
  // tensor-parallel model (each rank taking its slices).
  auto plain = mlp();
  plain->load_state_dict(state);
  expect_same_state(plain->state_dict(), train_single(D));
  auto again = models::MLP(kIn, kHidden, kClasses);  // another seed: every value is loaded
  again->to(kF64);
  parallelize_module(*again, topo.tensor_parallel_group(),
                     {{last_linear_name(*again), Style::kClassParallelHead}});
  again->load_state_dict(plain->state_dict());
  expect_same_state(again->state_dict(), train_single(D));
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
