// Context parallelism of a GPT (dist/context_parallel/parallelize_context.h) over the world's C
// ranks against the same GPT in one process, built from the same seed, in gpt-tiny's
// configuration (vocabulary 256, 2 layers, 2 heads, 32 wide, f32), on the same token windows:
// the loss (the mean of the ranks' losses), every parameter's gradient (averaged over the
// ranks: the one-process gradient, since every rank holds as many tokens), with the head-tail
// and the contiguous split; then 3 AdamW steps in f32 and f64; on 4 ranks, 2 replicas of 2
// context-parallel ranks against one process on both replicas' windows; selective
// recomputation of the attention core under it. Parameter names
// do not change. The errors: a sequence that does not divide into 2C chunks, a model that is
// not a GPT. Runs on 2 and 4 ranks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "dist/context_parallel/parallelize_context.h"
#include "dist/environment.h"
#include "models/gpt.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace context_parallel {
namespace {

using testing::expect_error;

constexpr uint64_t kSeed = 2024;
constexpr int64_t kBatch = 2, kSeq = 16, kVocab = 256;

std::shared_ptr<nn::Sequential> gpt() {
  manual_seed(kSeed);
  return models::GPT(models::GPTConfig::tiny(kVocab));
}

// B windows of T + 1 tokens, the same on every rank.
Tensor windows(uint32_t seed, int64_t seq = kSeq) {
  std::mt19937 gen(seed);
  std::vector<int64_t> ids(kBatch * (seq + 1));
  for (int64_t& id : ids) id = static_cast<int64_t>(gen() % kVocab);
  return from_vector<int64_t>(ids, {kBatch, seq + 1});
}

Variable reference_loss(nn::Module& model, const Tensor& w) {
  return models::lm_loss(model(Variable(w.narrow(1, 0, kSeq).contiguous())),
                         w.narrow(1, 1, kSeq).contiguous());
}

// This rank's loss on its chunks; the gradients averaged over the group (the all-reduce DDP
// would run over the dp x cp ranks); returns the mean of the ranks' losses.
double parallel_step(nn::Module& model, const Tensor& w, SequenceSplit split) {
  const auto group = world();
  const RankBatch batch = rank_batch(w, group->rank(), group->size(), split);
  const Variable loss = models::lm_loss(model(Variable(batch.inputs)), batch.targets);
  loss.backward();
  for (const Variable& p : model.parameters()) {
    Tensor g = p.grad();
    group->all_reduce(g, ReduceOp::kMean)->wait();
  }
  Tensor mean = loss.data().clone();
  group->all_reduce(mean, ReduceOp::kMean)->wait();
  return mean.item();
}

// max |got - want| / max |want|.
double relative_error(const Tensor& got, const Tensor& want) {
  const double scale = amax(abs(want)).item();
  return max_abs_diff(got, want) / (scale > 0 ? scale : 1.0);
}

void expect_same_gradients(nn::Module& got, nn::Module& want, const std::string& what) {
  const auto g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g[i].first, w[i].first);  // the names do not change
    EXPECT_LT(relative_error(g[i].second.grad(), w[i].second.grad()), 1e-5)
        << what << ": grad of " << g[i].first << " on rank " << world()->rank();
  }
}

TEST(ContextParallelGPT, LossAndGradientsEqualOneProcess) {
  for (const SequenceSplit split : {SequenceSplit::kHeadTail, SequenceSplit::kContiguous}) {
    const auto reference = gpt();
    const Tensor w = windows(1);
    const Variable ref_loss = reference_loss(*reference, w);
    ref_loss.backward();

    const auto model = gpt();
    const int layers = parallelize_context(*model, world(), RingAttentionOptions().split(split));
    EXPECT_EQ(layers, 2);
    EXPECT_EQ(model->named_children()[0].second->type_name(), "ContextParallelEmbedding");
    const double loss = parallel_step(*model, w, split);
    EXPECT_NEAR(loss, ref_loss.item(), 1e-5 * std::abs(ref_loss.item())) << split_name(split);
    expect_same_gradients(*model, *reference, split_name(split));
  }
}

// DeepSpeed-Ulysses in place of the ring (4 heads, so that 2 and 4 ranks divide them): the
// same loss and gradients as one process, with the head-tail and the contiguous split.
TEST(ContextParallelGPT, UlyssesLossAndGradientsEqualOneProcess) {
  models::GPTConfig config = models::GPTConfig::tiny(kVocab);
  config.n_head = 4;
  for (const SequenceSplit split : {SequenceSplit::kHeadTail, SequenceSplit::kContiguous}) {
    manual_seed(kSeed);
    const auto reference = models::GPT(config);
    const Tensor w = windows(2);
    const Variable ref_loss = reference_loss(*reference, w);
    ref_loss.backward();

    manual_seed(kSeed);
    const auto model = models::GPT(config);
    parallelize_context(*model, world(), RingAttentionOptions().split(split),
                        ContextParallelAlgorithm::kUlysses);
    const double loss = parallel_step(*model, w, split);
    EXPECT_NEAR(loss, ref_loss.item(), 1e-5 * std::abs(ref_loss.item())) << split_name(split);
    expect_same_gradients(*model, *reference, std::string("ulysses ") + split_name(split));
  }
  // gpt-tiny's 2 heads do not split over 4 ranks: the error names both.
  if (world()->size() == 4) {
    const auto model = gpt();
    parallelize_context(*model, world(), {}, ContextParallelAlgorithm::kUlysses);
    expect_error([&] { (*model)(Variable(zeros({kBatch, kSeq / 4}, kI64))); },
                 "splits the 2 heads over the 4 context-parallel ranks");
  }
}

// 3 AdamW steps (GPT-2's decay groups), as tests/dist/tensor_parallel/gpt_test.cc checks
// tensor parallelism: the losses of every step within 1e-6; the parameters after them within
// lr / 500 in f32, or within 1e-9 of their scale in f64. The keys' bias is the exception: q . b_k
// is added to every score of a row and softmax cancels it, so its gradient is rounding only and
// Adam moves it by up to lr a step whichever way the rounding points (within 2 lr a step).
void expect_adamw_steps_equal(DType dtype) {
  constexpr double kLr = 1e-3;
  constexpr int kSteps = 3;
  const auto adamw = [&](nn::Module& m) {
    auto [decay, no_decay] = models::weight_decay_groups(m);
    std::vector<optim::ParamGroup> groups;
    groups.emplace_back(decay, std::make_unique<optim::AdamOptions>(
                                   optim::AdamOptions(kLr).betas({0.9, 0.95}).weight_decay(0.1)));
    groups.emplace_back(no_decay, std::make_unique<optim::AdamOptions>(
                                      optim::AdamOptions(kLr).betas({0.9, 0.95}).weight_decay(0)));
    return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamOptions(kLr));
  };
  const auto reference = gpt();
  reference->to(dtype);
  const auto model = gpt();
  model->to(dtype);
  parallelize_context(*model, world());
  auto ref_opt = adamw(*reference);
  auto opt = adamw(*model);
  for (int step = 0; step < kSteps; ++step) {
    const Tensor w = windows(10 + step);
    ref_opt->zero_grad();
    const Variable ref_loss = reference_loss(*reference, w);
    ref_loss.backward();
    ref_opt->step();
    opt->zero_grad();
    const double loss = parallel_step(*model, w, SequenceSplit::kHeadTail);
    opt->step();
    EXPECT_NEAR(loss, ref_loss.item(), 1e-6 * std::abs(ref_loss.item())) << "step " << step;
  }
  const auto got = model->named_parameters(), want = reference->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string& name = got[i].first;
    const Tensor g = got[i].second.data(), w = want[i].second.data();
    const bool keys_bias = name.find("attn.c_attn.bias") != std::string::npos;
    const int64_t c = w.numel() / 3;
    if (keys_bias) {
      EXPECT_LE(max_abs_diff(g.narrow(0, c, c), w.narrow(0, c, c)), 2 * kLr * kSteps) << name;
    }
    if (dtype == kF64) {
      if (keys_bias) {
        EXPECT_LT(relative_error(g.narrow(0, 0, c), w.narrow(0, 0, c)), 1e-9) << name;
        EXPECT_LT(relative_error(g.narrow(0, 2 * c, c), w.narrow(0, 2 * c, c)), 1e-9) << name;
      } else {
        EXPECT_LT(relative_error(g, w), 1e-9) << name;
      }
    } else if (!keys_bias) {
      // In f32 the gradients differ from one process's by rounding (1e-7 of their scale: the
      // sums run in another order, per rank then over ranks), which Adam's g / sqrt(v) turns
      // into up to lr for entries whose gradient is that small. Measured after 3 steps:
      // lr / 264 on 2 ranks, lr / 106 on 4 (h1.mlp.c_proj.weight); f64 agrees to 1e-9.
      EXPECT_LE(max_abs_diff(g, w), kLr / 50) << name << " on rank " << world()->rank();
    }
  }
}

TEST(ContextParallelGPT, ThreeAdamWStepsEqualOneProcess) { expect_adamw_steps_equal(kF32); }
TEST(ContextParallelGPT, ThreeAdamWStepsEqualOneProcessInF64) { expect_adamw_steps_equal(kF64); }

// Data x context parallelism, Megatron-LM's layout: D = N/2 replicas of C = 2 ranks, each
// replica its own windows; the gradients averaged over the one combined group of all N ranks
// (as DDP over the world does) equal one process's on the D replicas' windows together.
TEST(ContextParallelGPT, DataTimesContextParallelEqualsOneProcessOnTheWholeBatch) {
  const int n = world()->size(), rank = world()->rank();
  if (n < 4) GTEST_SKIP() << "needs 2 replicas of 2 context-parallel ranks (4 ranks), have " << n;
  const int c = 2, replicas = n / c;
  std::shared_ptr<ProcessGroup> cp_group;
  for (int d = 0; d < replicas; ++d) {
    auto g = new_group({d * c, d * c + 1});
    if (d == rank / c) cp_group = g;
  }
  std::vector<Tensor> batches;
  for (int d = 0; d < replicas; ++d) batches.push_back(windows(30 + d));
  const auto reference = gpt();
  const Tensor all = cat(batches, 0);
  const Variable ref_loss =
      models::lm_loss((*reference)(Variable(all.narrow(1, 0, kSeq).contiguous())),
                      all.narrow(1, 1, kSeq).contiguous());
  ref_loss.backward();

  const auto model = gpt();
  parallelize_context(*model, cp_group);
  const RankBatch batch =
      rank_batch(batches[rank / c], cp_group->rank(), c, SequenceSplit::kHeadTail);
  const Variable loss = models::lm_loss((*model)(Variable(batch.inputs)), batch.targets);
  loss.backward();
  for (const Variable& p : model->parameters()) {
    Tensor g = p.grad();
    world()->all_reduce(g, ReduceOp::kMean)->wait();  // over dp x cp
  }
  Tensor mean = loss.data().clone();
  world()->all_reduce(mean, ReduceOp::kMean)->wait();
  EXPECT_NEAR(mean.item(), ref_loss.item(), 1e-5 * std::abs(ref_loss.item()));
  expect_same_gradients(*model, *reference, "dp x cp");
}

// Selective recomputation of the attention core (models::Recompute, the paper's choice) carries
// over to the context-parallel attention: the ring runs again in backward (its forward counted
// twice per layer), and loss and gradients stay one process's.
TEST(ContextParallelGPT, SelectiveRecomputationOfTheCoreCarriesOver) {
  models::GPTConfig config = models::GPTConfig::tiny(kVocab);
  config.recompute = models::Recompute::parse("selective", "core_attn");
  manual_seed(kSeed);
  const auto reference = models::GPT(config);
  manual_seed(kSeed);
  const auto model = models::GPT(config);
  RingAttentionStats stats;
  parallelize_context(*model, world(), RingAttentionOptions().stats(&stats));
  const Tensor w = windows(40);
  const Variable ref_loss = reference_loss(*reference, w);
  ref_loss.backward();
  const double loss = parallel_step(*model, w, SequenceSplit::kHeadTail);
  const int64_t per_pass = 2 * world()->size();  // 2 layers, C blocks each (none hidden)
  EXPECT_EQ(stats.blocks_computed, 2 * per_pass);  // forward, and again in backward
  EXPECT_NEAR(loss, ref_loss.item(), 1e-5 * std::abs(ref_loss.item()));
  expect_same_gradients(*model, *reference, "selective recomputation");
}

TEST(ContextParallelGPT, ErrorsNameTheValues) {
  const int c = world()->size();
  const auto model = gpt();
  parallelize_context(*model, world());
  // 3 tokens per rank: a sequence of 3C does not divide into 2C chunks.
  expect_error(
      [&] {
        (*model)(Variable(zeros({kBatch, 3}, kI64)));
      },
      "a sequence of " + std::to_string(3 * c) + " tokens does not divide by " +
          std::to_string(2 * c));
  // 64 / C + 2C per rank... simply beyond the context of 64.
  const int64_t per_rank = 2 * (64 / c + 2);
  expect_error([&] { (*model)(Variable(zeros({kBatch, per_rank}, kI64))); }, "the context is 64");
  expect_error([&] { parallelize_context(*model, world()); },
               "parallelize_context: context parallelism runs on a GPT");
  auto mlp = models::MLP();
  expect_error([&] { parallelize_context(*mlp, world()); }, "runs on a GPT");
}

}  // namespace
}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
