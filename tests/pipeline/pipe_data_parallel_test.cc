// Pipeline x data parallelism equals one process on the global batch: the Pipe averaging each
// stage's gradients over its replicas (K = 1 and K = 2 x D = 2), and ZeRO-1 and ZeRO-2
// optimizers doing it instead, with the reduce-scatters a step sends counted from the ledger.
#include <gtest/gtest.h>

#include <string>

#include "dist/environment.h"
#include "dist/topology.h"
#include "dist/zero/zero_optimizer.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
#include "pipeline/pipe.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

// The reference for D data-parallel replicas: each replica's 8 rows of an 8D-row batch, a mean
// over its rows cut into M micro-batches, averaged over the replicas.
void reference_data_parallel_step(nn::Sequential& reference, optim::SGD& opt, const Batch& global,
                                  int M, int D = 2) {
  opt.zero_grad();
  for (int d = 0; d < D; ++d) {
    for (const Microbatch& mb : split_microbatches(global.x.narrow(0, 8 * d, 8),
                                                   global.y.narrow(0, 8 * d, 8), M)) {
      (loss_fn(reference.forward(Variable(mb.input)), mb.target) * (mb.weight / D)).backward();
    }
  }
  opt.step();
}

TEST(Pipe, OneStagePerReplicaIsDataParallelTraining) {
  // K = 1 (no messages at all) and D = world size: the Pipe degenerates to gradient
  // accumulation plus the data-parallel all-reduce.
  auto world = dist::world();
  const int D = world->size(), M = 3;
  dist::Topology topo(world, 1);
  ASSERT_EQ(topo.pipeline_group()->size(), 1);
  auto reference = deep_mlp();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Pipe pipe(deep_mlp(), topo.pipeline_group(), loss_fn,
            PipeOptions().microbatches(M).data_parallel_group(topo.data_parallel_group()));
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const Batch global = make_batch(step, 8 * D, {1, 8, 8});
    reference_data_parallel_step(*reference, ref_opt, global, M, D);
    opt.zero_grad();
    const int d = topo.replica();
    pipe.train_step(global.x.narrow(0, 8 * d, 8), global.y.narrow(0, 8 * d, 8));
    opt.step();
  }
  expect_stage_matches_reference(pipe, *reference, 1e-5, *topo.pipeline_group());
  // The Pipe reduces these gradients itself: a ZeRO optimizer on them too is an error (before
  // any communication, on every rank alike).
  EXPECT_THROW(dist::ZeroRedundancyOptimizer(pipe.parameters(), topo.data_parallel_group(),
                                             dist::zero_factory<optim::SGD>(optim::SGDOptions(0.1))),
               Error);
}

TEST(Pipe, PipelineTimesDataParallelEqualsOneProcessOnTheGlobalBatch) {
  auto world = dist::world();
  if (world->size() != 4) GTEST_SKIP() << "needs 4 ranks (2 stages x 2 replicas)";
  dist::Topology topo(world, 2);
  const int M = 4;
  auto reference = deep_mlp();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto model = deep_mlp();
  Pipe pipe(model, topo.pipeline_group(), loss_fn,
            PipeOptions().microbatches(M).schedule("1f1b").data_parallel_group(
                topo.data_parallel_group()));
  optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const Batch global = make_batch(step, 16, {1, 8, 8});
    reference_data_parallel_step(*reference, ref_opt, global, M);
    opt.zero_grad();
    const int d = topo.replica();
    pipe.train_step(global.x.narrow(0, 8 * d, 8), global.y.narrow(0, 8 * d, 8));
    opt.step();
  }
  expect_stage_matches_reference(pipe, *reference, 1e-5, *topo.pipeline_group());
  // The gradient reduction is on the trace.
  ASSERT_FALSE(pipe.trace().empty());
  EXPECT_TRUE(pipe.trace().back().reduction);
}

// ZeRO averages the gradients itself in its reduce-scatter: the Pipe gets no data-parallel
// group, the sharded optimizer gets it. Returns the data-parallel group's reduce-scatter calls
// of the last step.
int64_t pipeline_times_zero_matches_one_process(int zero_stage, const std::string& schedule) {
  auto world = dist::world();
  dist::Topology topo(world, 2);
  const int M = 4;
  auto reference = deep_mlp();
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Pipe pipe(deep_mlp(), topo.pipeline_group(), loss_fn,
            PipeOptions().microbatches(M).schedule(schedule).chunks_per_rank(
                schedule == "interleaved" ? 2 : 1));
  dist::ZeroRedundancyOptimizer opt(pipe.parameters(), topo.data_parallel_group(),
                                    [](std::vector<Variable> shard) {
                                      return std::make_unique<optim::SGD>(
                                          shard, optim::SGDOptions(0.05).momentum(0.9));
                                    },
                                    dist::ZeroOptions().stage(zero_stage));
  int64_t calls = 0;
  for (int step = 0; step < 3; ++step) {
    const Batch global = make_batch(step, 16, {1, 8, 8});
    reference_data_parallel_step(*reference, ref_opt, global, M);
    opt.zero_grad();
    const int d = topo.replica();
    topo.data_parallel_group()->ledger().reset();
    pipe.train_step(global.x.narrow(0, 8 * d, 8), global.y.narrow(0, 8 * d, 8));
    opt.step();
    calls = topo.data_parallel_group()->ledger().entry(dist::CollectiveKind::kReduceScatter).calls;
  }
  expect_stage_matches_reference(pipe, *reference, 1e-5, *topo.pipeline_group());
  return calls;
}

TEST(Pipe, PipelineTimesZeroOneEqualsOneProcessOnTheGlobalBatch) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks (2 stages x 2 replicas)";
  // One reduce-scatter of the stage's flat gradient, in step().
  EXPECT_EQ(pipeline_times_zero_matches_one_process(1, "gpipe"), 1);
}

TEST(Pipe, PipelineTimesZeroTwoEqualsOneProcessOnTheGlobalBatch) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks (2 stages x 2 replicas)";
  // Stage 2 reduce-scatters during each backward, and each micro-batch's B is a backward of
  // its own: M = 4 reduce-scatters of the stage's gradient (one bucket) per step, where stage 1
  // sends one. The shard's gradient accumulates them.
  EXPECT_EQ(pipeline_times_zero_matches_one_process(2, "1f1b"), 4);
  EXPECT_EQ(pipeline_times_zero_matches_one_process(2, "gpipe"), 4);
  // Interleaved, v = 2: each chunk's backward of each micro-batch, 2M; the other chunk's
  // parameters contribute zeros.
  EXPECT_EQ(pipeline_times_zero_matches_one_process(2, "interleaved"), 8);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
