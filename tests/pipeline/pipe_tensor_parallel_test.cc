// 3D parallelism: a Pipe over stages whose Linears are tensor-parallel (Megatron-LM's column then
// row pairs), with data-parallel replicas when the world has room: P x T x D ranks, laid out by
// dist::Topology. Against one process on the global batch with the same seed: equal parameters
// after 3 SGD-momentum steps with gradient clipping active, the clipping norm reduced by
// dist::clip_grad_norm (slices summed over the tensor-parallel group with replicated parameters
// counted once, stages summed over the pipeline group); the trained model, gathered with
// Pipe::gather_model and saved through its state dict (full, unsplit weights), loads into a
// plain model. On 4 ranks P = T = 2, D = 1; on 8 ranks D = 2 as well, with a class-parallel
// head option covered by tensor_parallel's own tests.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/grad_norm.h"
#include "dist/tensor_parallel/norm_counted.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/topology.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/serialize.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "pipeline/pipe.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tensor/safetensors.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int64_t kPerReplica = 8, kIn = 8, kClasses = 6;
constexpr int kSteps = 3;
constexpr double kMaxNorm = 0.05;  // below every step's norm: clipping acts on each step

// Linear(8, 16) ReLU Linear(16, 8) ReLU Linear(8, 16) ReLU Linear(16, 6): two column/row pairs;
// uniform balance on 2 stages cuts after the first pair's ReLU (4 + 3 layers).
std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(17);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back("fc0", std::make_shared<nn::Linear>(kIn, 16));
  m->push_back("relu0", std::make_shared<nn::ReLU>());
  m->push_back("fc1", std::make_shared<nn::Linear>(16, 8));
  m->push_back("relu1", std::make_shared<nn::ReLU>());
  m->push_back("fc2", std::make_shared<nn::Linear>(8, 16));
  m->push_back("relu2", std::make_shared<nn::ReLU>());
  m->push_back("fc3", std::make_shared<nn::Linear>(16, kClasses));
  m->to(kF64);
  return m;
}

std::pair<Tensor, Tensor> global_batch(int step, int replicas) {
  Generator g(800 + step);
  const int64_t n = kPerReplica * replicas;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) y.push_back((i * 5 + step) % kClasses);
  return {randn({n, kIn}, kF64, &g), from_vector<int64_t>(y, {n})};
}

optim::SGDOptions sgd() { return optim::SGDOptions(0.1).momentum(0.9); }

// `zero`: the replicas run a ZeRO-1 optimizer over the stage's parameters (it averages the
// gradients and clips over its shards, the tensor-parallel and the pipeline group) instead of
// the Pipe's data-parallel all-reduce.
void three_d_equals_one_process(bool zero) {
  auto world = dist::world();
  ASSERT_EQ(world->size() % 4, 0) << "run on 4 or 8 ranks";
  const int P = 2, T = 2, D = world->size() / (P * T);
  dist::Topology topology(world, P, T);

  // The reference: one process, the global batch, clipped by the global norm.
  auto reference = mlp();
  optim::SGD ref_opt(reference->parameters(), sgd());
  std::vector<double> ref_norms;
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = global_batch(step, D);
    ref_opt.zero_grad();
    cross_entropy(reference->forward(Variable(x)), y).backward();
    ref_norms.push_back(optim::clip_grad_norm(reference->parameters(), kMaxNorm));
    ref_opt.step();
  }

  // 3D: every rank builds the same full model, splits its Linears over the tensor-parallel
  // group, and the Pipe cuts it into stages along the pipeline group.
  auto model = mlp();
  dist::tensor_parallel::parallelize_module(
      *model, topology.tensor_parallel_group(),
      {{"fc0", dist::tensor_parallel::Style::kColumnwise},
       {"fc1", dist::tensor_parallel::Style::kRowwise},
       {"fc2", dist::tensor_parallel::Style::kColumnwise},
       {"fc3", dist::tensor_parallel::Style::kRowwise}});
  PipeOptions options = PipeOptions().microbatches(2).schedule("1f1b");
  if (!zero) options.data_parallel_group(topology.data_parallel_group());
  Pipe pipe(model, topology.pipeline_group(),
            [](const Variable& out, const Tensor& y) { return cross_entropy(out, y); }, options);
  EXPECT_EQ(pipe.stage(), topology.stage());
  std::unique_ptr<optim::Optimizer> opt;
  if (zero) {
    opt = std::make_unique<dist::ZeroRedundancyOptimizer>(
        pipe.parameters(), topology.data_parallel_group(), dist::zero_factory<optim::SGD>(sgd()));
  } else {
    opt = std::make_unique<optim::SGD>(pipe.parameters(), sgd());
  }
  const std::vector<Variable> counted = dist::tensor_parallel::norm_counted_parameters(
      pipe.parameters(), *model, topology.tensor_parallel_rank());
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = global_batch(step, D);
    const int64_t at = kPerReplica * topology.replica();
    opt->zero_grad();
    pipe.train_step(x.narrow(0, at, kPerReplica), y.narrow(0, at, kPerReplica));
    // Slices add up over the tensor-parallel group, stages over the pipeline group; DDP
    // replicas hold the same averaged gradients and are not added, ZeRO's shards are.
    const double norm =
        zero ? static_cast<dist::ZeroRedundancyOptimizer&>(*opt).clip_grad_norm(
                   kMaxNorm, counted, {topology.tensor_parallel_group(), topology.pipeline_group()})
             : dist::clip_grad_norm(pipe.parameters(), counted, kMaxNorm,
                                    {topology.tensor_parallel_group(), topology.pipeline_group()});
    EXPECT_NEAR(norm, ref_norms[step], 1e-9 * ref_norms[step]) << "step " << step;
    EXPECT_GT(norm, kMaxNorm) << "clipping must act";
    opt->step();
  }

  // The whole trained model on every rank, its state dict unsplit: it equals the reference's.
  pipe.gather_model();
  const StateDict full = model->state_dict();  // collective over the tensor-parallel group
  for (const auto& [name, t] : reference->state_dict()) {
    ASSERT_TRUE(full.contains(name)) << name;
    ASSERT_EQ(full.at(name).shape(), t.shape()) << name;
    EXPECT_LT(max_abs_diff(full.at(name), t), 1e-9) << name;
  }
  // Saved by rank 0 (the state dict was gathered by every rank: it is collective), it loads
  // into a plain model.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + (zero ? "/pipe_tp_zero_model.safetensors" : "/pipe_tp_model.safetensors");
  if (world->rank() == 0) save_safetensors(path, full);
  world->barrier()->wait();
  auto plain = mlp();
  nn::load_weights(*plain, path);
  for (const auto& [name, t] : reference->state_dict()) {
    EXPECT_LT(max_abs_diff(plain->state_dict().at(name), t), 1e-9) << name;
  }
  if (world->rank() == 0) {
    std::printf("P %d x T %d x D %d%s: 3 steps with clipping (norms %.4f %.4f %.4f, max %.2f) "
                "equal one process\n", P, T, D, zero ? " (ZeRO-1)" : "", ref_norms[0],
                ref_norms[1], ref_norms[2], kMaxNorm);
  }
}

TEST(PipeTensorParallel, PipelineTimesTensorTimesDataParallelEqualsOneProcessWithClipping) {
  three_d_equals_one_process(/*zero=*/false);
}

TEST(PipeTensorParallel, ZeroReplicasClipOverShardsSlicesAndStages) {
  three_d_equals_one_process(/*zero=*/true);
}

// The counting rule by itself: column-parallel weight and bias and row-parallel weight are
// slices (counted everywhere); the row-parallel bias is whole on every rank (counted on
// tensor-parallel rank 0 only).
TEST(PipeTensorParallel, NormCountsSlicesEverywhereAndReplicasOnce) {
  auto world = dist::world();
  dist::Topology topology(world, 1, 2);
  auto model = mlp();
  dist::tensor_parallel::parallelize_module(
      *model, topology.tensor_parallel_group(),
      {{"fc0", dist::tensor_parallel::Style::kColumnwise},
       {"fc1", dist::tensor_parallel::Style::kRowwise}});
  const auto counted = dist::tensor_parallel::norm_counted_parameters(
      model->parameters(), *model, topology.tensor_parallel_rank());
  // fc0.weight, fc0.bias, fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias.
  EXPECT_EQ(counted.size(), topology.tensor_parallel_rank() == 0 ? 8u : 3u);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
