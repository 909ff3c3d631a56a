// Loss scaling through a pipeline: an inf in one rank's gradients (one stage, one replica) makes
// every rank of the world skip the step, because the scaler's found_inf is MAX-reduced over the
// world (dist/amp.h): stages see only their own parameters' gradients, replicas only theirs
// until the step. The test checks the skip on every rank, the parameters left untouched, the
// scale backed off identically, replicas of a stage identical afterwards, and, against one
// process doing gradient accumulation under the same autocast and the same skipped step, the
// trained model. Without the reduction the ranks would disagree (the last test: it can fail).
//
// Two stages; on 4 ranks each stage has two data-parallel replicas (dist::Topology).
#include <gtest/gtest.h>

#include <limits>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "dist/amp.h"
#include "dist/environment.h"
#include "dist/topology.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
#include "pipeline/pipe.h"
#include "tensor/ops.h"
#include "tests/pipeline/mlp.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMicrobatches = 4;
constexpr int kPoisonedStep = 2;

std::shared_ptr<nn::Sequential> model() { return mlp_of(23, {16, 32, 32, 6}); }

// Replica r's batch at a step (the replicas of a stage read different data, as under DDP).
std::pair<Tensor, Tensor> batch(int step, int replica) {
  Generator g(700 + 10 * step + replica);
  const Tensor x = randn({12, 16}, kF32, &g);
  return {x, argmax(x.narrow(1, 0, 6), 1)};
}

Variable loss_of(const Variable& out, const Tensor& y) { return cross_entropy(out, y); }

std::vector<Tensor> snapshot(const std::vector<Variable>& params) {
  std::vector<Tensor> out;
  for (const Variable& p : params) out.push_back(p.data().clone());
  return out;
}

bool unchanged(const std::vector<Variable>& params, const std::vector<Tensor>& before) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!allclose(params[i].data(), before[i], 0, 0)) return false;
  }
  return true;
}

struct ScaledRun {
  std::shared_ptr<nn::Sequential> model;
  std::vector<bool> stepped;  // per step, on this rank
  double final_scale = 0;
  int64_t skipped = 0;
};

// Pipeline training under f16 autocast; at kPoisonedStep the last rank of the world writes inf
// into its first gradient after the backward (after its stage's data-parallel average, so no
// other rank can see it but through the scaler's reduction).
ScaledRun train_pipelined(const dist::Topology& topology, bool reduce_found_inf) {
  ScaledRun run;
  run.model = model();
  auto scaler = std::make_shared<optim::GradScaler>(
      optim::GradScalerOptions().init_scale(1024).growth_interval(100),
      reduce_found_inf ? dist::found_inf_all_reduce(topology.world()) : nullptr);
  Pipe pipe(run.model, topology.pipeline_group(),
            [scaler](const Variable& out, const Tensor& y) { return scaler->scale(loss_of(out, y)); },
            PipeOptions().microbatches(kMicrobatches).schedule("1f1b")
                .data_parallel_group(topology.data_parallel_group()));
  const auto params = pipe.parameters();
  optim::SGD opt(params, optim::SGDOptions(0.05).momentum(0.9));
  const bool last_rank = topology.world()->rank() == topology.world()->size() - 1;
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    const auto [x, y] = batch(step, topology.replica());
    {
      AutocastGuard autocast(kF16);
      pipe.train_step(x, y);
    }
    const auto before = snapshot(params);
    if (step == kPoisonedStep && last_rank) Tensor(params[0].grad()).fill_(kInf);
    run.stepped.push_back(scaler->step(opt));
    scaler->update();
    EXPECT_EQ(unchanged(params, before), !run.stepped.back()) << "step " << step;
  }
  run.final_scale = scaler->get_scale();
  run.skipped = scaler->skipped_steps();
  pipe.gather_model();
  return run;
}

// One process: the replicas' batches concatenated, each replica's batch accumulated over the
// same micro-batches under the same autocast, the poisoned step skipped.
std::shared_ptr<nn::Sequential> train_reference(int replicas) {
  auto reference = model();
  optim::SGD opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    for (int r = 0; r < replicas; ++r) {
      const auto [x, y] = batch(step, r);
      for (const Microbatch& mb : split_microbatches(x, y, kMicrobatches)) {
        Variable loss;
        {
          AutocastGuard autocast(kF16);
          loss = loss_of(reference->forward(Variable(mb.input)), mb.target) * mb.weight;
        }
        (loss * (1.0 / replicas)).backward();
      }
    }
    if (step != kPoisonedStep) opt.step();
  }
  return reference;
}

TEST(PipeAmp, InfOnOneRankMakesEveryRankSkip) {
  const dist::Topology topology(dist::world(), 2);
  const ScaledRun run = train_pipelined(topology, /*reduce_found_inf=*/true);
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ(run.stepped[step], step != kPoisonedStep) << "step " << step;
  }
  EXPECT_EQ(run.final_scale, 512.0);
  EXPECT_EQ(run.skipped, 1);

  // Every rank holds the same whole model (gather_model), replicas included, and it is what one
  // process trains with the same step skipped.
  const auto params = run.model->parameters();
  const auto reference = train_reference(topology.data_parallel_size())->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor root = params[i].data().clone();
    dist::world()->broadcast(root, 0)->wait();
    EXPECT_TRUE(allclose(root, params[i].data(), 0, 0)) << "parameter " << i << " differs from rank 0's";
    EXPECT_LT(max_abs_diff(params[i].data(), reference[i].data()), 1e-5)
        << "parameter " << i << " differs from one process's";
  }
}

TEST(PipeAmp, WithoutTheReductionOnlyThePoisonedRankSkips) {
  const dist::Topology topology(dist::world(), 2);
  const ScaledRun run = train_pipelined(topology, /*reduce_found_inf=*/false);
  const bool last_rank = dist::world()->rank() == dist::world()->size() - 1;
  EXPECT_EQ(run.stepped[kPoisonedStep], !last_rank);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
