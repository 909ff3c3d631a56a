// Sequence parallelism on top of Megatron-LM's tensor parallelism of a GPT (Korthikanti et al.
// 2022, section 4.2.2; parallelize_gpt with GPTParallelOptions().sequence_parallel(true)) against
// the same GPT in one process and under plain tensor parallelism, built from the same seed, in a
// gpt-tiny-sized configuration (vocabulary 256, 2 layers, 32 wide; 4 heads so that T = 4 splits
// them): logits, loss and every parameter's gradient within 1e-5 of each tensor's scale in f32;
// the bytes sent (plain tensor parallelism's, and the sequence-parallel parameters' gradient sums);
// the replicated parameters' gradients identical on every rank; the activations autograd keeps,
// smaller than plain tensor parallelism's by the residual stream's (T - 1) / T, measured by the
// counting allocator; 3 AdamW steps with clipping; the state dict (a checkpoint moves between
// sequence parallelism on and off); DDP and ZeRO-1 over the replicas (4 ranks: T = 2 x D = 2)
// against one process on the whole batch; the error for a sequence that does not divide by T.
// Runs on 2 ranks (T = 2) and 4 (T = 4, and T = 2 x D = 2).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/grad_norm.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/tensor_parallel/norm_counted.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/tensor_parallel/sequence_parallel.h"
#include "dist/topology.h"
#include "dist/zero/zero_optimizer.h"
#include "models/gpt.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/dist/tensor_parallel/gathered_grads.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

using testing::expect_error;

constexpr uint64_t kSeed = 2025;
constexpr int64_t kBatch = 2, kSeq = 16, kVocab = 256, kWidth = 32, kLayers = 2;

// gpt-tiny's sizes (vocabulary 256, context 64, 2 layers, 32 wide) with 4 heads of 8.
models::GPTConfig config() {
  models::GPTConfig c = models::GPTConfig::tiny(kVocab);
  c.n_head = 4;
  return c;
}

std::shared_ptr<nn::Sequential> plain_gpt(DType dtype = kF32) {
  manual_seed(kSeed);
  auto model = models::GPT(config());
  model->to(dtype);
  return model;
}

struct ParallelGPT {
  std::shared_ptr<nn::Sequential> model;
  VocabParallelLM vocabulary;
  Variable loss(const Tensor& idx, const Tensor& targets) const {
    return vocabulary.loss((*model)(Variable(idx)), targets);
  }
};

ParallelGPT parallel_gpt(bool sequence_parallel, DType dtype = kF32,
                         std::shared_ptr<ProcessGroup> group = dist::world()) {
  auto model = plain_gpt(dtype);
  VocabParallelLM vocabulary = parallelize_gpt(
      *model, group, GPTParallelOptions().sequence_parallel(sequence_parallel));
  return {model, vocabulary};
}

// Token ids [rows, kSeq] in [0, 256), the same on every rank.
Tensor tokens(uint32_t seed, int64_t rows = kBatch, int64_t seq = kSeq) {
  std::mt19937 gen(seed);
  std::vector<int64_t> ids(rows * seq);
  for (int64_t& id : ids) id = static_cast<int64_t>(gen() % kVocab);
  return from_vector<int64_t>(ids, {rows, seq});
}

// max |got - want| / max |want|.
double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const Tensor g = got.to(kF64), w = want.to(kF64);
  const double scale = amax(abs(w)).item();
  const double diff = max_abs_diff(g, w);
  return scale > 0 ? diff / scale : diff;
}

using testing::gathered_grads;

struct Measured {
  double loss = 0;
  Tensor logits;                    // [B, S, V], gathered
  std::vector<Tensor> grads;        // the unsplit layout
  int64_t forward_bytes = 0, backward_bytes = 0;
};

Measured run(const ParallelGPT& p, const Tensor& idx, const Tensor& targets) {
  auto group = p.vocabulary.wte->group();
  Measured out;
  int64_t before = group->ledger().total_bytes();
  const Variable logits = (*p.model)(Variable(idx));
  out.forward_bytes = group->ledger().total_bytes() - before;
  const Variable loss = p.vocabulary.loss(logits, targets);
  out.loss = loss.item();
  before = group->ledger().total_bytes();
  loss.backward();
  out.backward_bytes = group->ledger().total_bytes() - before;
  out.logits = p.vocabulary.lm_head->gather_logits(logits.data());
  out.grads = gathered_grads(*p.model);
  return out;
}

TEST(GPTSequenceParallel, LogitsLossAndGradientsEqualOneProcessAndPlainTensorParallelism) {
  const int T = dist::world()->size();
  auto reference = plain_gpt();
  const Tensor idx = tokens(1), targets = tokens(2);
  const Variable ref_logits = (*reference)(Variable(idx));
  const Variable ref_loss = models::lm_loss(ref_logits, targets);
  ref_loss.backward();

  const Measured tp = run(parallel_gpt(false), idx, targets);
  const ParallelGPT p = parallel_gpt(true);
  const Measured sp = run(p, idx, targets);
  EXPECT_NEAR(sp.loss, ref_loss.item(), 1e-6 * std::abs(ref_loss.item()));
  EXPECT_NEAR(sp.loss, tp.loss, 1e-6 * std::abs(tp.loss));
  EXPECT_LT(relative_error(sp.logits, ref_logits.data()), 1e-5);
  EXPECT_LT(relative_error(sp.logits, tp.logits), 1e-5);
  const auto names = reference->named_parameters();
  ASSERT_EQ(sp.grads.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_LT(relative_error(sp.grads[i], names[i].second.grad()), 1e-5) << names[i].first;
    EXPECT_LT(relative_error(sp.grads[i], tp.grads[i]), 1e-5) << names[i].first;
  }

  // The same activation bytes as plain tensor parallelism in both directions (each all-reduce
  // of [B, S, C] f32 replaced by a reduce-scatter and an all-gather: 2 (T - 1) / T of it per
  // rank either way). Backward adds the gradient sums of the sequence_parallel parameters (per
  // layer 2 LayerNorms' weight and bias and 2 row-parallel biases, and ln_f's: C values each,
  // all-reduced), wpe's rows' gradients ([S, C], all-gathered by the scatter's backward), and
  // the column-parallel Linears' inputs (c_attn, c_fc per layer and lm_head's: [B, S, C] each),
  // all-gathered again for their weights' gradients, since each keeps only its S/T tokens.
  EXPECT_EQ(sp.forward_bytes, tp.forward_bytes);
  const int64_t c = kWidth, sums = kLayers * (2 * 2 + 2) + 2;
  const int64_t gathers = (2 * kLayers + 1) * (T - 1) * kBatch * kSeq * c * 4 / T;
  const int64_t extra = sums * 2 * (T - 1) * c * 4 / T + (T - 1) * kSeq * c * 4 / T + gathers;
  EXPECT_EQ(sp.backward_bytes, tp.backward_bytes + extra);
  // Plain tensor parallelism's forward: g after each sublayer and the embedding's.
  EXPECT_EQ(tp.forward_bytes, (2 * kLayers + 1) * 2 * (T - 1) * kBatch * kSeq * c * 4 / T);

  // The model's sequence_parallel parameters: 5 LayerNorms' 2 and 4 row-parallel biases.
  EXPECT_EQ(sequence_parallel_parameters(*p.model).size(), 2u * (2 * kLayers + 1) + 2 * kLayers);
}

// The parameters every rank holds whole get the same gradient on every rank, bit for bit: the
// LayerNorms' and the row-parallel biases' after their sum over the group, wpe's gathered whole.
TEST(GPTSequenceParallel, ReplicatedParametersGetTheSameWholeGradientOnEveryRank) {
  const ParallelGPT p = parallel_gpt(true);
  p.loss(tokens(3), tokens(4)).backward();
  const std::vector<bool> replicated = replicated_parameters(*p.model);
  const auto params = p.model->named_parameters();
  int checked = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!replicated[i]) continue;
    const Tensor mine = params[i].second.grad();
    Tensor rank0 = mine.clone();
    dist::world()->broadcast(rank0, 0)->wait();
    EXPECT_EQ(max_abs_diff(mine, rank0), 0.0) << params[i].first;
    ++checked;
  }
  EXPECT_EQ(checked, 1 + 2 + kLayers * (4 + 2));  // wpe, ln_f, per block ln_1, ln_2, 2 biases
}

// What autograd keeps from a forward (and the loss) to its backward, per rank, by the counting
// allocator: under sequence parallelism the residual stream that the LayerNorms save (each
// one's input [B, S, C] and its mean and 1/std [B S]: 2 L + 1 of them, the embedding's output
// and every sublayer's residual sum) is this rank's S/T tokens, and so are the inputs the
// column-parallel Linears keep (each LayerNorm's output, 2 L + 1 of them too: all-gathered again
// in backward); everything else (the attention's q, k, v of n_head / T heads, the MLP's 4C / T
// features, the logits [B, S, V/T]) is plain tensor parallelism's.
int64_t kept_by_autograd(const ParallelGPT& p, const Tensor& idx, const Tensor& targets) {
  const Device cpu = Device::cpu();
  const int64_t before = memory_stats(cpu).current_bytes;
  const Variable loss = p.loss(idx, targets);
  const int64_t kept = memory_stats(cpu).current_bytes - before;
  loss.backward();
  return kept;
}

TEST(GPTSequenceParallel, ActivationsKeptAreSmallerByTheLayerNormRegionsShare) {
  const int T = dist::world()->size();
  const Tensor idx = tokens(5), targets = tokens(6);
  const ParallelGPT tp = parallel_gpt(false), sp = parallel_gpt(true);
  kept_by_autograd(tp, idx, targets);  // warm: nothing allocated once only in the measured runs
  const int64_t tp_bytes = kept_by_autograd(tp, idx, targets);
  const int64_t sp_bytes = kept_by_autograd(sp, idx, targets);
  const int64_t norms = 2 * kLayers + 1;
  // x, mean and rstd; the output the next Linear keeps
  const int64_t per_norm = (kBatch * kSeq * kWidth + 2 * kBatch * kSeq) * 4 + kBatch * kSeq * kWidth * 4;
  EXPECT_EQ(tp_bytes - sp_bytes, norms * per_norm * (T - 1) / T)
      << "plain tensor parallelism keeps " << tp_bytes << " bytes, sequence parallelism "
      << sp_bytes;
  EXPECT_LT(sp_bytes, tp_bytes);
  if (dist::world()->rank() == 0) {
    std::printf("activations kept per rank (T = %d, B = %lld, S = %lld): tensor parallelism %lld "
                "bytes, sequence parallelism %lld\n", T, static_cast<long long>(kBatch),
                static_cast<long long>(kSeq), static_cast<long long>(tp_bytes),
                static_cast<long long>(sp_bytes));
  }
}

// 3 AdamW steps (GPT-2's decay groups), the gradients clipped to a norm below theirs every step
// (clipping's norm counts the replicated parameters once, norm_counted.h): the losses within
// 1e-6, the parameters within lr / 500 of one process's (f32; gpt_test.cc says why, and why the
// keys' bias is only within 2 lr a step).
TEST(GPTSequenceParallel, ThreeClippedAdamWStepsEqualOneProcess) {
  constexpr double kLr = 1e-3, kMaxNorm = 0.5;
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
  auto reference = plain_gpt();
  const ParallelGPT p = parallel_gpt(true);
  auto ref_opt = adamw(*reference);
  auto opt = adamw(*p.model);
  const std::vector<Variable> held = p.model->parameters();
  const std::vector<Variable> counted = norm_counted_parameters(held, *p.model, dist::world()->rank());
  for (int step = 0; step < kSteps; ++step) {
    const Tensor idx = tokens(10 + step), targets = tokens(20 + step);
    ref_opt->zero_grad();
    const Variable ref_loss = models::lm_loss((*reference)(Variable(idx)), targets);
    ref_loss.backward();
    const double ref_norm = optim::clip_grad_norm(reference->parameters(), kMaxNorm);
    ref_opt->step();
    opt->zero_grad();
    const Variable loss = p.loss(idx, targets);
    loss.backward();
    const double norm = dist::clip_grad_norm(held, counted, kMaxNorm, {dist::world()});
    opt->step();
    EXPECT_NEAR(loss.item(), ref_loss.item(), 1e-6 * std::abs(ref_loss.item())) << "step " << step;
    EXPECT_GT(ref_norm, kMaxNorm);
    EXPECT_NEAR(norm, ref_norm, 1e-5 * ref_norm) << "step " << step;
  }
  const StateDict want = reference->state_dict(), got = p.model->state_dict();
  for (const auto& [name, w] : want) {
    const Tensor g = got.at(name);
    if (name.find("attn.c_attn.bias") != std::string::npos) {
      EXPECT_LE(max_abs_diff(g, w), 2 * kLr * kSteps) << name;
    } else {
      EXPECT_LE(max_abs_diff(g, w), kLr / 500) << name;
    }
  }
}

// The parameters are the plain model's: its state dict, keys and values, both ways, and a
// checkpoint of a sequence-parallel run loads into a plain tensor-parallel model (and back),
// which then computes the same loss.
TEST(GPTSequenceParallel, StateDictIsThePlainModelsAndMovesBetweenSequenceParallelOnAndOff) {
  auto reference = plain_gpt();
  const ParallelGPT sp = parallel_gpt(true);
  const StateDict want = reference->state_dict(), got = sp.model->state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(max_abs_diff(got.at(name), w), 0.0) << name;
  }
  StateDict changed;
  for (const auto& [name, w] : want) changed.set(name, mul(w, 1.25));
  sp.model->load_state_dict(changed);
  const ParallelGPT tp = parallel_gpt(false);
  tp.model->load_state_dict(sp.model->state_dict());
  for (const auto& [name, t] : tp.model->state_dict()) {
    EXPECT_EQ(max_abs_diff(t, changed.at(name)), 0.0) << name;
  }
  const Tensor idx = tokens(7), targets = tokens(8);
  const double a = sp.loss(idx, targets).item(), b = tp.loss(idx, targets).item();
  EXPECT_NEAR(a, b, 1e-6 * std::abs(b));
}

// Each rank holds S/T tokens: a sequence that does not divide by T is an error naming both, on
// every rank alike (no rank is left waiting in a collective).
TEST(GPTSequenceParallel, ASequenceThatDoesNotDivideByTIsAnError) {
  const int T = dist::world()->size();
  const ParallelGPT p = parallel_gpt(true);
  const int64_t s = 2 * T + 1;
  // The first layer to see the sequence says so (wte's or wpe's lookup, in the order the
  // compiler evaluates wte(idx) + wpe(positions)).
  expect_error([&] { (*p.model)(Variable(tokens(9, kBatch, s))); },
               "Embedding: a sequence of " + std::to_string(s) +
                   " tokens does not divide by the tensor-parallel size T = " + std::to_string(T));
  // The model still runs afterwards (nothing was left half-sent).
  EXPECT_TRUE(std::isfinite(p.loss(tokens(9), tokens(10)).item()));
}

// Sequence parallelism inside data parallelism (4 ranks: T = 2 x D = 2 replicas, f64), DDP or
// ZeRO-1 over the replicas: the tensor-parallel group's sum of the sequence_parallel parameters'
// gradients first (in backward), then the replicas' average. 3 SGD steps equal one process on
// the whole batch, to 1e-10.
void expect_data_parallel_equals_one_process(bool zero) {
  auto world = dist::world();
  if (world->size() != 4) GTEST_SKIP() << "needs 4 ranks (T = 2 x D = 2)";
  constexpr int kSteps = 3;
  const optim::SGDOptions sgd = optim::SGDOptions(0.1).momentum(0.9);
  Topology topo(world, 1, 2);
  const int D = topo.data_parallel_size(), d = topo.replica();
  auto reference = plain_gpt(kF64);
  optim::SGD ref_opt(reference->parameters(), sgd);
  auto p = parallel_gpt(true, kF64, topo.tensor_parallel_group());
  std::shared_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> opt;
  if (zero) {
    opt = std::make_unique<ZeroRedundancyOptimizer>(p.model->parameters(),
                                                    topo.data_parallel_group(),
                                                    zero_factory<optim::SGD>(sgd));
  } else {
    ddp = std::make_shared<DistributedDataParallel>(p.model, topo.data_parallel_group());
    opt = std::make_unique<optim::SGD>(ddp->parameters(), sgd);
  }
  nn::Module& forward = ddp ? static_cast<nn::Module&>(*ddp) : *p.model;
  for (int step = 0; step < kSteps; ++step) {
    const Tensor idx = tokens(30 + step, kBatch * D), targets = tokens(40 + step, kBatch * D);
    ref_opt.zero_grad();
    models::lm_loss((*reference)(Variable(idx)), targets).backward();
    ref_opt.step();
    opt->zero_grad();
    const Tensor mine = idx.narrow(0, d * kBatch, kBatch), mine_targets = targets.narrow(0, d * kBatch, kBatch);
    p.vocabulary.loss(forward.forward(Variable(mine)), mine_targets).backward();
    opt->step();
  }
  const StateDict want = reference->state_dict(), got = p.model->state_dict();
  for (const auto& [name, w] : want) {
    EXPECT_LT(relative_error(got.at(name), w), 1e-10) << name;
  }
}

TEST(GPTSequenceParallel, UnderDDPEqualsOneProcess) { expect_data_parallel_equals_one_process(false); }
TEST(GPTSequenceParallel, UnderZero1EqualsOneProcess) { expect_data_parallel_equals_one_process(true); }

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
