// A GPT (gpt-tiny, 4 heads) on 2 pipeline stages x 2 context-parallel ranks (4 ranks), from a
// user's program: dist::Topology(world, 2, 1, 2) places the groups, parallelize_context splits
// every attention's sequence over the stage's context-parallel group, and the Pipe runs each
// rank's chunks of the micro-batches (pipe.h), its stage's gradients averaged over the stage's
// data-parallel group (the C ranks holding it). Against one process's gradient accumulation
// over the same micro-batches, for 1F1B and ZB-H1: the loss and every gradient within 1e-5,
// then 3 AdamW steps within the GPT pipeline tests' tolerance.
#include <gtest/gtest.h>

#include <string>

#include "dist/context_parallel/parallelize_context.h"
#include "dist/environment.h"
#include "dist/topology.h"
#include "tests/pipeline/gpt_reference.h"

namespace tessera {
namespace pipeline {
namespace {

namespace cp = dist::context_parallel;

constexpr int kMicrobatches = 2;
constexpr int64_t kRows = 4;

std::shared_ptr<nn::Sequential> four_head_gpt() {
  models::GPTConfig config = models::GPTConfig::tiny();
  config.n_head = 4;
  manual_seed(kGPTSeed);
  return models::GPT(config);
}

void context_parallel_pipeline_matches_one_process(const std::string& schedule) {
  SCOPED_TRACE(schedule);
  auto world = dist::world();
  const dist::Topology topo(world, /*stages=*/2, /*tp=*/1, /*cp=*/2);
  const auto& cp_group = topo.context_parallel_group();
  auto reference = four_head_gpt();
  optim::AdamW ref_opt(reference->parameters(), adamw_options());
  auto model = four_head_gpt();
  cp::parallelize_context(*model, cp_group);
  Pipe pipe(model, topo.pipeline_group(), gpt_loss,
            gpt_options(schedule, kMicrobatches).data_parallel_group(topo.data_parallel_group()));
  optim::AdamW opt(pipe.parameters(), adamw_options());
  for (int step = 0; step < 3; ++step) {
    const TokenBatch b = token_batch(step, kRows);
    ref_opt.zero_grad();
    const double expected = reference_backward(*reference, b, kMicrobatches);
    opt.zero_grad();
    // This rank's chunks of every window (head-tail), inputs and targets alike.
    const Tensor x = cp::rank_rows(b.x, 1, cp_group->rank(), cp_group->size(), cp::SequenceSplit::kHeadTail);
    const Tensor y = cp::rank_rows(b.y, 1, cp_group->rank(), cp_group->size(), cp::SequenceSplit::kHeadTail);
    Tensor loss = scalar_tensor(pipe.train_step(x, y), kF64).reshape({1});
    cp_group->all_reduce(loss, dist::ReduceOp::kMean)->wait();  // the mean of the chunks' means
    EXPECT_NEAR(loss.item(), expected, 1e-6) << "step " << step;
    if (step == 0) {
      Tensor compared = scalar_tensor(expect_parameters_match(pipe, *reference, 1e-5, 0, /*grads=*/true), kI64).reshape({1});
      topo.pipeline_group()->all_reduce(compared)->wait();
      EXPECT_EQ(compared.item(), static_cast<double>(reference->parameters().size() + 1));
    }
    ref_opt.step();
    opt.step();
  }
  expect_parameters_match(pipe, *reference, 1e-5, 3 * kLr);
}

TEST(PipeContextParallel, OneFOneBEqualsOneProcess) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks (2 stages x 2 context-parallel)";
  context_parallel_pipeline_matches_one_process("1f1b");
}

TEST(PipeContextParallel, ZeroBubbleEqualsOneProcess) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks (2 stages x 2 context-parallel)";
  context_parallel_pipeline_matches_one_process("zb-h1");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
