// Context parallelism inside Megatron-LM's tensor parallelism of a GPT (with and without its
// sequence parallelism), on dist::Topology's grid (topology.h: tensor-parallel ranks fastest,
// then context-parallel, then replicas), against the same GPT in one process from the same seed:
// gpt-tiny's sizes (vocabulary 256, 2 layers, 32 wide) with 4 heads, so each tensor-parallel
// rank runs the ring over 2 of them.
//
//   parallelize_gpt(*gpt, topology.tensor_parallel_group(), options);   // heads, vocabulary (SP)
//   parallelize_context(*gpt, topology.context_parallel_group());       // the ring, positions
//
// A rank holds its tensor-parallel slices of the model and its head-tail chunks of each of its
// replica's sequences (under sequence parallelism, its tensor-parallel share of those between
// the sublayers). Its loss is the vocabulary-parallel cross-entropy over its chunks' tokens;
// the gradients averaged over Topology::data_parallel_group() (every rank with the same slices:
// D x C of them) equal one process's on the replicas' windows together: the loss, and every
// parameter's gradient gathered from its slices, within 1e-5 of its scale in f32 (with the
// ring, and with DeepSpeed-Ulysses under sequence parallelism); then 3 SGD
// steps with momentum under DDP over that group, in f64, within 1e-10. Runs on 4 ranks (T = 2 x
// C = 2) and 8 (T = 2 x C = 2 x D = 2).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dist/context_parallel/parallelize_context.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/topology.h"
#include "models/gpt.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tests/dist/tensor_parallel/gathered_grads.h"

namespace tessera {
namespace dist {
namespace context_parallel {
namespace {

namespace tp = tensor_parallel;

constexpr uint64_t kSeed = 2026;
constexpr int64_t kBatch = 2, kSeq = 16, kVocab = 256;

models::GPTConfig config() {
  models::GPTConfig c = models::GPTConfig::tiny(kVocab);
  c.n_head = 4;
  return c;
}

std::shared_ptr<nn::Sequential> plain_gpt(DType dtype) {
  manual_seed(kSeed);
  auto model = models::GPT(config());
  model->to(dtype);
  return model;
}

// The grid of the world: T = 2, C = 2, D = world / 4.
const Topology& grid() {
  static const Topology topology(world(), 1, 2, 2);
  return topology;
}

struct ParallelGPT {
  std::shared_ptr<nn::Sequential> model;
  tp::VocabParallelLM vocabulary;
};

ParallelGPT parallel_gpt(bool sequence_parallel, DType dtype,
                         ContextParallelAlgorithm algorithm = ContextParallelAlgorithm::kRing) {
  auto model = plain_gpt(dtype);
  tp::VocabParallelLM vocabulary = tp::parallelize_gpt(
      *model, grid().tensor_parallel_group(),
      tp::GPTParallelOptions().sequence_parallel(sequence_parallel));
  parallelize_context(*model, grid().context_parallel_group(), {}, algorithm);
  return {model, vocabulary};
}

// Each replica's B windows of T + 1 tokens (the same on every rank of the replica).
Tensor windows(uint32_t seed, int replica) {
  std::mt19937 gen(seed * 101 + replica);
  std::vector<int64_t> ids(kBatch * (kSeq + 1));
  for (int64_t& id : ids) id = static_cast<int64_t>(gen() % kVocab);
  return from_vector<int64_t>(ids, {kBatch, kSeq + 1});
}

// Every replica's windows, one after another: one process's batch.
Tensor all_windows(uint32_t seed) {
  std::vector<Tensor> parts;
  for (int d = 0; d < grid().data_parallel_size(); ++d) parts.push_back(windows(seed, d));
  return cat(parts, 0);
}

Variable reference_loss(nn::Module& model, const Tensor& w) {
  return models::lm_loss(model(Variable(w.narrow(1, 0, kSeq).contiguous())),
                         w.narrow(1, 1, kSeq).contiguous());
}

// This rank's chunks of its replica's windows through the model: its loss.
Variable rank_loss(const ParallelGPT& p, nn::Module& forward, uint32_t seed) {
  const auto& cp = grid().context_parallel_group();
  const RankBatch batch = rank_batch(windows(seed, grid().replica()), cp->rank(), cp->size(),
                                     SequenceSplit::kHeadTail);
  return p.vocabulary.loss(forward.forward(Variable(batch.inputs)), batch.targets);
}

double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const double scale = amax(abs(want.to(kF64))).item();
  const double diff = max_abs_diff(got.to(kF64), want.to(kF64));
  return scale > 0 ? diff / scale : diff;
}

using testing::gathered_grads;

void expect_gradients_equal_one_process(
    bool sequence_parallel, ContextParallelAlgorithm algorithm = ContextParallelAlgorithm::kRing) {
  if (world()->size() % 4 != 0) GTEST_SKIP() << "needs T = 2 x C = 2 ranks per replica";
  const auto reference = plain_gpt(kF32);
  const Variable ref_loss = reference_loss(*reference, all_windows(1));
  ref_loss.backward();

  const ParallelGPT p = parallel_gpt(sequence_parallel, kF32, algorithm);
  const Variable loss = rank_loss(p, *p.model, 1);
  loss.backward();
  const auto& dp = grid().data_parallel_group();
  for (const Variable& param : p.model->parameters()) {
    Tensor g = param.grad();
    dp->all_reduce(g, ReduceOp::kMean)->wait();
  }
  Tensor mean = loss.data().clone();
  dp->all_reduce(mean, ReduceOp::kMean)->wait();
  EXPECT_NEAR(mean.item(), ref_loss.item(), 1e-5 * std::abs(ref_loss.item()));

  const std::vector<Tensor> grads = gathered_grads(*p.model);
  const auto names = reference->named_parameters();
  ASSERT_EQ(grads.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_LT(relative_error(grads[i], names[i].second.grad()), 1e-5)
        << names[i].first << " on rank " << world()->rank();
  }
}

TEST(ContextTimesTensorParallelGPT, GradientsEqualOneProcess) {
  expect_gradients_equal_one_process(false);
}
TEST(ContextTimesTensorParallelGPT, WithSequenceParallelismGradientsEqualOneProcess) {
  expect_gradients_equal_one_process(true);
}
// DeepSpeed-Ulysses over each tensor-parallel rank's 2 heads (1 per context-parallel rank).
TEST(ContextTimesTensorParallelGPT, UlyssesWithSequenceParallelismGradientsEqualOneProcess) {
  expect_gradients_equal_one_process(true, ContextParallelAlgorithm::kUlysses);
}

// DDP over the data-parallel group (D x C ranks) steps every rank's slices as one process steps
// the whole model: 3 SGD steps with momentum in f64.
void expect_ddp_steps_equal_one_process(bool sequence_parallel) {
  if (world()->size() % 4 != 0) GTEST_SKIP() << "needs T = 2 x C = 2 ranks per replica";
  constexpr int kSteps = 3;
  const optim::SGDOptions sgd = optim::SGDOptions(0.1).momentum(0.9);
  const auto reference = plain_gpt(kF64);
  optim::SGD ref_opt(reference->parameters(), sgd);
  const ParallelGPT p = parallel_gpt(sequence_parallel, kF64);
  auto ddp = std::make_shared<DistributedDataParallel>(p.model, grid().data_parallel_group());
  optim::SGD opt(ddp->parameters(), sgd);
  for (int step = 0; step < kSteps; ++step) {
    ref_opt.zero_grad();
    reference_loss(*reference, all_windows(20 + step)).backward();
    ref_opt.step();
    opt.zero_grad();
    rank_loss(p, *ddp, 20 + step).backward();
    opt.step();
  }
  const StateDict want = reference->state_dict(), got = p.model->state_dict();
  for (const auto& [name, w] : want) {
    EXPECT_LT(relative_error(got.at(name), w), 1e-10) << name << " on rank " << world()->rank();
  }
}

TEST(ContextTimesTensorParallelGPT, UnderDDPThreeStepsEqualOneProcess) {
  expect_ddp_steps_equal_one_process(false);
}
TEST(ContextTimesTensorParallelGPT, WithSequenceParallelismUnderDDPThreeStepsEqualOneProcess) {
  expect_ddp_steps_equal_one_process(true);
}

}  // namespace
}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
