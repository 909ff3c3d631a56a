// Megatron-LM's tensor parallelism of a GPT (parallelize_gpt: the blocks by gpt_plan, c_attn
// split by heads, the attention's c_proj rowwise, c_fc columnwise, the MLP's c_proj rowwise; and
// the vocabulary: wte's rows, the tied lm_head's logits and the loss over them split) against the
// same GPT in one process, built from the same seed, in gpt-tiny's configuration (vocabulary 256,
// 2 layers, 2 heads, 32 wide): logits (gathered), loss and every parameter's gradient (the split
// ones gathered into the unsplit layout) within 1e-5 of each tensor's scale in f32, for the blocks
// alone and for the whole; then 3 AdamW steps (f32, and f64 to 1e-9); the state dict equal to the
// plain model's, keys and values, in both directions; the replicated parameters' gradients
// identical on every rank; clipping's global norm; the bytes the blocks, the embedding and
// lm_head all-reduce; the head-count and vocabulary errors. Runs on 1 rank (T = 1) and 2.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/grad_norm.h"
#include "dist/tensor_parallel/column_parallel_linear.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/tensor_parallel/norm_counted.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/tensor_parallel/vocab_parallel_embedding.h"
#include "models/gpt.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "tensor/ops.h"
#include "tests/dist/tensor_parallel/gathered_grads.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

using testing::expect_error;

constexpr uint64_t kSeed = 2024;
constexpr int64_t kBatch = 2, kSeq = 16, kVocab = 256, kWidth = 32;

// For the plan's shapes and the head-count error: 4 heads of 8 (or n_head of 8).
models::GPTConfig small_config(int64_t n_head = 4) {
  models::GPTConfig c;
  c.vocab_size = 67;
  c.context = 16;
  c.n_layer = 2;
  c.n_head = n_head;
  c.n_embd = 8 * n_head;  // 32 for 4 heads
  return c;
}

// The train tool's --model=gpt-tiny with the byte tokenizer: vocabulary 256, context 64, 2
// layers, 2 heads, 32 wide.
models::GPTConfig tiny() { return models::GPTConfig::tiny(kVocab); }

std::shared_ptr<nn::Sequential> plain_gpt() {
  manual_seed(kSeed);
  return models::GPT(tiny());
}

// The same GPT (same seed) tensor-parallel over the world: the blocks only (gpt_plan, the loss
// models::lm_loss over full logits), or the whole (parallelize_gpt, the loss over split logits).
struct ParallelGPT {
  std::shared_ptr<nn::Sequential> model;
  std::optional<VocabParallelLM> vocabulary;
  Variable loss(const Variable& logits, const Tensor& targets) const {
    return vocabulary ? vocabulary->loss(logits, targets) : models::lm_loss(logits, targets);
  }
  Tensor full_logits(const Tensor& logits) const {
    return vocabulary ? vocabulary->lm_head->gather_logits(logits) : logits;
  }
};

ParallelGPT parallel_gpt(bool vocabulary = true, DType dtype = kF32) {
  manual_seed(kSeed);
  ParallelGPT p{models::GPT(tiny()), std::nullopt};
  p.model->to(dtype);
  if (vocabulary) {
    p.vocabulary = parallelize_gpt(*p.model, dist::world());
  } else {
    parallelize_module(*p.model, dist::world(), gpt_plan(*p.model));
  }
  return p;
}

// Token ids [kBatch, kSeq] in [0, 256), the same on every rank (so in every rank's rows).
Tensor tokens(uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> ids(kBatch * kSeq);
  for (int64_t& id : ids) id = static_cast<int64_t>(gen() % kVocab);
  return from_vector<int64_t>(ids, {kBatch, kSeq});
}

// max |got - want| / max |want|: the error relative to the tensor's scale.
double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const Tensor g = got.to(kF64), w = want.to(kF64);
  const double scale = amax(abs(w)).item();
  const double diff = max_abs_diff(g, w);
  return scale > 0 ? diff / scale : diff;
}

using testing::gathered_grads;

TEST(GPTTensorParallel, ThePlanCutsEveryBlockAsMegatronDoes) {
  manual_seed(kSeed);
  auto model = models::GPT(small_config());
  const ParallelizePlan plan = gpt_plan(*model);
  const ParallelizePlan want = {
      {"h0.attn.c_attn", Style::kColumnwiseHeads}, {"h0.attn.c_proj", Style::kRowwise},
      {"h0.mlp.c_fc", Style::kColumnwise},         {"h0.mlp.c_proj", Style::kRowwise},
      {"h1.attn.c_attn", Style::kColumnwiseHeads}, {"h1.attn.c_proj", Style::kRowwise},
      {"h1.mlp.c_fc", Style::kColumnwise},         {"h1.mlp.c_proj", Style::kRowwise}};
  EXPECT_EQ(plan, want);
  // c_attn holds q | k | v of this rank's n_head / T heads.
  const int T = dist::world()->size();
  parallelize_module(*model, dist::world(), plan);
  for (const auto& [name, p] : model->named_parameters()) {
    if (name == "h0.attn.c_attn.weight") EXPECT_EQ(p.shape(), (Shape{3 * 32 / T, 32}));
    if (name == "h0.mlp.c_fc.weight") EXPECT_EQ(p.shape(), (Shape{4 * 32 / T, 32}));
    if (name == "h0.mlp.c_proj.weight") EXPECT_EQ(p.shape(), (Shape{32, 4 * 32 / T}));
  }
}

// parallelize_gpt leaves V/T rows of wte on each rank and lm_head reading them.
TEST(GPTTensorParallel, TheVocabularyIsSplitByRows) {
  const int T = dist::world()->size();
  const ParallelGPT p = parallel_gpt();
  EXPECT_EQ(p.vocabulary->wte->vocab_slice().start, dist::world()->rank() * kVocab / T);
  int64_t held = 0;
  for (const auto& [name, param] : p.model->named_parameters()) {
    if (name == "embed.wte.weight") EXPECT_EQ(param.shape(), (Shape{kVocab / T, kWidth}));
    held += param.numel();
  }
  // 1/T of wte, and of every block's Linears but the row-parallel biases.
  const int64_t c = kWidth, block_split = 3 * c * c + 3 * c + c * c + 4 * c * c + 4 * c + 4 * c * c;
  EXPECT_EQ(held, tiny().parameters() - (T - 1) * (kVocab * c + 2 * block_split) / T);
  EXPECT_EQ(p.model->named_modules().size(), plain_gpt()->named_modules().size());
}

void expect_logits_loss_and_gradients_equal(bool vocabulary) {
  auto reference = plain_gpt();
  const ParallelGPT p = parallel_gpt(vocabulary);
  const Tensor idx = tokens(1), targets = tokens(2);
  const Variable ref_logits = (*reference)(Variable(idx));
  const Variable ref_loss = models::lm_loss(ref_logits, targets);
  ref_loss.backward();

  auto group = dist::world();
  const int T = group->size();
  const int64_t before = group->ledger().total_bytes();
  const Variable logits = (*p.model)(Variable(idx));
  const int64_t forward_bytes = group->ledger().total_bytes() - before;
  EXPECT_EQ(logits.shape(), (Shape{kBatch, kSeq, vocabulary ? kVocab / T : kVocab}));
  const Variable loss = p.loss(logits, targets);
  const int64_t loss_bytes = group->ledger().total_bytes() - before - forward_bytes;
  EXPECT_NEAR(loss.item(), ref_loss.item(), 1e-6 * std::abs(ref_loss.item()));
  loss.backward();
  const int64_t backward_bytes = group->ledger().total_bytes() - before - forward_bytes - loss_bytes;
  EXPECT_LT(relative_error(p.full_logits(logits.data()), ref_logits.data()), 1e-5);
  // Two all-reduces of [B, S, C] f32 a block in each direction (g after each sublayer in
  // forward, f before each in backward), a ring sending 2 (T - 1) / T of them per rank
  // (T the tensor-parallel size). The vocabulary adds one more each way, of the same size: the
  // embedding's g in forward, lm_head's f in backward; and the loss's two all-reduces of
  // B x S and 3 B x S floats, never the [B, S, V] logits.
  const int64_t all_reduce = 2 * (T - 1) * kBatch * kSeq * kWidth * 4 / T;
  const int64_t extra = vocabulary ? all_reduce : 0;
  EXPECT_EQ(forward_bytes, 2 * 2 * all_reduce + extra);
  EXPECT_EQ(backward_bytes, 2 * 2 * all_reduce + extra);
  EXPECT_EQ(loss_bytes, vocabulary ? 2 * (T - 1) * (1 + 3) * kBatch * kSeq * 4 / T : 0);

  const auto ref_params = reference->named_parameters();
  const std::vector<Tensor> grads = gathered_grads(*p.model);
  ASSERT_EQ(grads.size(), ref_params.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_LT(relative_error(grads[i], ref_params[i].second.grad()), 1e-5) << ref_params[i].first;
  }
}

TEST(GPTTensorParallel, LogitsLossAndGradientsEqualOneProcess) {
  expect_logits_loss_and_gradients_equal(/*vocabulary=*/true);
}
TEST(GPTTensorParallel, BlocksAloneEqualOneProcess) {
  expect_logits_loss_and_gradients_equal(/*vocabulary=*/false);
}

// An optimizer over parameter groups numbers its state in the groups' order (GPT-2's decay group
// first), not the model's: given that order, the gather and the slice find each parameter's
// split (before, a resumed GPT with decay groups read 'state.5.master' [32, 16] as c_attn's).
TEST(GPTTensorParallel, TheOptimizersOrderNumbersItsState) {
  const ParallelGPT p = parallel_gpt();
  nn::Sequential* model = p.model.get();
  p.loss((*model)(Variable(tokens(1))), tokens(2)).backward();
  const std::vector<Tensor> by_model = gathered_grads(*model);
  std::vector<Variable> order = model->parameters();
  std::reverse(order.begin(), order.end());
  StateDict local;
  for (size_t i = 0; i < order.size(); ++i) local.set("state." + std::to_string(i) + ".grad", order[i].grad());
  const StateDict full = gather_optimizer_state(local, *model, order);
  for (size_t i = 0; i < order.size(); ++i) {
    const Tensor& want = by_model[order.size() - 1 - i];
    EXPECT_EQ(max_abs_diff(full.at("state." + std::to_string(i) + ".grad"), want), 0.0) << i;
  }
  const StateDict back = slice_optimizer_state(full, *model, order);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(max_abs_diff(back.at("state." + std::to_string(i) + ".grad"), order[i].grad()), 0.0) << i;
  }
}

// Megatron reduces nothing for the parameters every rank holds whole (LayerNorms, wpe, the
// row-parallel biases): their inputs and output gradients are the same on every rank, so are
// their gradients, bit for bit.
TEST(GPTTensorParallel, ReplicatedParametersGetTheSameGradientOnEveryRank) {
  const ParallelGPT p = parallel_gpt();
  nn::Sequential* model = p.model.get();
  p.loss((*model)(Variable(tokens(3))), tokens(4)).backward();
  const std::vector<bool> replicated = replicated_parameters(*model);
  const auto params = model->named_parameters();
  int checked = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!replicated[i]) continue;
    const Tensor mine = params[i].second.grad();
    Tensor rank0 = mine.clone();
    dist::world()->broadcast(rank0, 0)->wait();
    EXPECT_EQ(max_abs_diff(mine, rank0), 0.0) << params[i].first;
    ++checked;
  }
  // wpe, ln_f's 2; per block ln_1, ln_2 (2 each) and the two row-parallel biases (wte is split).
  EXPECT_EQ(checked, 1 + 2 + 2 * (4 + 2));
}

// Clipping's global norm under tensor parallelism counts every element of the whole model once:
// each rank its slices (wte's rows among them), tensor-parallel rank 0 the parameters every rank
// holds whole. It equals one process's norm, and the clipped gradients (gathered) equal its.
TEST(GPTTensorParallel, ClippingNormCountsEveryElementOnce) {
  auto reference = plain_gpt();
  const ParallelGPT p = parallel_gpt();
  const Tensor idx = tokens(6), targets = tokens(7);
  models::lm_loss((*reference)(Variable(idx)), targets).backward();
  p.loss((*p.model)(Variable(idx)), targets).backward();
  constexpr double kMaxNorm = 0.1;  // below the norm: clipping scales every gradient
  const double want = optim::clip_grad_norm(reference->parameters(), kMaxNorm);
  const std::vector<Variable> held = p.model->parameters();
  const double got = dist::clip_grad_norm(
      held, norm_counted_parameters(held, *p.model, dist::world()->rank()), kMaxNorm, {dist::world()});
  ASSERT_GT(want, kMaxNorm);
  EXPECT_NEAR(got, want, 1e-5 * want);
  const auto ref_params = reference->named_parameters();
  const std::vector<Tensor> grads = gathered_grads(*p.model);
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_LT(relative_error(grads[i], ref_params[i].second.grad()), 1e-5) << ref_params[i].first;
  }
}

// 3 AdamW steps (GPT-2's decay groups) on the plain and the tensor-parallel GPT from the same
// seed: the losses of every step within 1e-6, the parameters after them within lr / 500 in f32,
// or, in f64, within 1e-9 of their scale.
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
  manual_seed(kSeed);
  auto reference = models::GPT(tiny());
  reference->to(dtype);
  const ParallelGPT p = parallel_gpt(/*vocabulary=*/true, dtype);
  nn::Sequential* model = p.model.get();
  auto ref_opt = adamw(*reference);
  auto opt = adamw(*model);
  for (int step = 0; step < kSteps; ++step) {
    const Tensor idx = tokens(10 + step), targets = tokens(20 + step);
    ref_opt->zero_grad();
    const Variable ref_loss = models::lm_loss((*reference)(Variable(idx)), targets);
    ref_loss.backward();
    ref_opt->step();
    opt->zero_grad();
    const Variable loss = p.loss((*model)(Variable(idx)), targets);
    loss.backward();
    opt->step();
    EXPECT_NEAR(loss.item(), ref_loss.item(), 1e-6 * std::abs(ref_loss.item())) << "step " << step;
  }
  const StateDict want = reference->state_dict(), got = model->state_dict();
  for (const auto& [name, w] : want) {
    const Tensor g = got.at(name);
    const int64_t c = w.numel() / 3;
    if (name.find("attn.c_attn.bias") != std::string::npos) {
      // The keys' bias adds q . b_k to every score of a row, which softmax cancels: its gradient
      // is rounding only, and Adam moves it by up to lr a step whichever way the rounding points
      // (models/gpt_test.cc says the same against PyTorch). Each within 2 lr a step.
      EXPECT_LE(max_abs_diff(g.narrow(0, c, c), w.narrow(0, c, c)), 2 * kLr * kSteps) << name;
    }
    if (dtype == kF64) {
      // Rounding at 1e-16 flips no gradient's sign: all but the keys' bias agree to 1e-9.
      if (name.find("attn.c_attn.bias") != std::string::npos) {
        EXPECT_LT(relative_error(g.narrow(0, 0, c), w.narrow(0, 0, c)), 1e-9) << name;
        EXPECT_LT(relative_error(g.narrow(0, 2 * c, c), w.narrow(0, 2 * c, c)), 1e-9) << name;
      } else {
        EXPECT_LT(relative_error(g, w), 1e-9) << name;
      }
    } else if (name.find("attn.c_attn.bias") == std::string::npos) {
      // In f32 the partial sums' different order (1e-7 of a gradient's scale) changes Adam's
      // update of the entries whose gradient is that small (g / sqrt(v) ~ its sign): after 3
      // steps each parameter is within lr / 500 of one process's (measured on 2 ranks: lr / 1900
      // at most, h1.attn.c_attn.weight; the loss of each step within 1e-7).
      EXPECT_LE(max_abs_diff(g, w), kLr / 500) << name;
    }
  }
}

TEST(GPTTensorParallel, ThreeAdamWStepsEqualOneProcess) { expect_adamw_steps_equal(kF32); }
TEST(GPTTensorParallel, ThreeAdamWStepsEqualOneProcessInF64) { expect_adamw_steps_equal(kF64); }

TEST(GPTTensorParallel, StateDictIsThePlainModelsBothWays) {
  auto reference = plain_gpt();
  const ParallelGPT p = parallel_gpt();
  nn::Sequential* model = p.model.get();
  const StateDict want = reference->state_dict(), got = model->state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(got.at(name).shape(), w.shape()) << name;
    EXPECT_EQ(max_abs_diff(got.at(name), w), 0.0) << name;
  }
  // A single-process checkpoint (every value changed) into the parallel model, and back out.
  StateDict changed;
  for (const auto& [name, w] : want) changed.set(name, mul(w, 1.5));
  model->load_state_dict(changed);
  manual_seed(99);
  auto plain = models::GPT(tiny());
  plain->load_state_dict(model->state_dict());
  for (const auto& [name, t] : plain->state_dict()) {
    EXPECT_EQ(max_abs_diff(t, changed.at(name)), 0.0) << name;
  }
  // And the parallel model computes what the plain one does with those weights.
  const Tensor idx = tokens(5);
  EXPECT_LT(relative_error(p.full_logits((*model)(Variable(idx)).data()), (*plain)(Variable(idx)).data()),
            1e-5);
}

TEST(GPTTensorParallel, HeadsThatDoNotDivideByTAreAnError) {
  auto group = dist::world();
  const int T = group->size();
  manual_seed(kSeed);
  auto model = models::GPT(small_config(/*n_head=*/3));  // 3 heads of 8, 24 wide
  if (T == 1 || 3 % T == 0) {
    parallelize_module(*model, group, gpt_plan(*model));
    return;
  }
  expect_error([&] { parallelize_module(*model, group, gpt_plan(*model)); },
               "ColumnParallelLinear::heads: n_head 3 is not divisible by the tensor-parallel size T = " +
                   std::to_string(T));
  // Split by heads only as a CausalSelfAttention's c_attn.
  auto other = models::GPT(small_config());
  expect_error([&] { parallelize_module(*other, group, {{"h0.mlp.c_fc", Style::kColumnwiseHeads}}); },
               "must be the c_attn of a CausalSelfAttention, but its parent is a GPTMLP");
}

// Each rank holds V/T rows: a vocabulary that does not divide by T is an error naming both
// (models::padded_vocab's multiple of 64 divides by any T up to 64 that is a power of 2).
TEST(GPTTensorParallel, AVocabularyThatDoesNotDivideByTIsAnError) {
  auto group = dist::world();
  const int T = group->size();
  manual_seed(kSeed);
  auto model = models::GPT(small_config());  // vocabulary 67
  if (T == 1) {
    parallelize_gpt(*model, group);
    return;
  }
  expect_error([&] { parallelize_gpt(*model, group); },
               "VocabParallelEmbedding: the vocabulary of 67 tokens does not divide by the "
               "tensor-parallel size T = " + std::to_string(T));
  expect_error([&] { parallelize_vocabulary(*model, group, "embed.wpe", "h0"); },
               "parallelize_vocabulary: 'h0' is a GPTBlock with parameters of its own");
  expect_error([&] { parallelize_vocabulary(*model, group, "ln_f", "lm_head"); },
               "parallelize_vocabulary: 'ln_f' is a LayerNorm, not an Embedding");
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
