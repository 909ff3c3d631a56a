// The vocabulary split over the ranks (Megatron-LM's VocabParallelEmbedding and the output
// projection tied to it) against nn::Embedding and x wte^T with the same full table, in f64:
// the lookup and its weight gradient (repeated tokens, tokens in every rank's rows) exactly; the
// tied head's logits, x's gradient (summed over the ranks by f) and the table's gradient from both
// uses; a finite-difference gradcheck of head and loss with respect to x; the bytes the lookup
// and the head's backward all-reduce; state dicts both ways; the memory a rank keeps; and the
// errors (a vocabulary that does not divide by T, token ids out of range). Run on 2 and 3 ranks
// (12 tokens: 6 + 6 and 4 + 4 + 4).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/vocab_parallel_embedding.h"
#include "dist/tensor_parallel/vocab_parallel_lm_head.h"
#include "nn/nn.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

using testing::expect_error;

constexpr int64_t kVocab = 12, kDim = 5;

std::shared_ptr<nn::Embedding> full_table(uint64_t seed) {
  manual_seed(seed);
  auto e = std::make_shared<nn::Embedding>(kVocab, kDim);
  e->to(kF64);
  return e;
}

// Token ids [3, 7]: every token of the vocabulary (so every rank's rows), some twice.
Tensor token_ids() {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 21; ++i) ids.push_back((i * 5) % kVocab);
  return from_vector<int64_t>(ids, {3, 7});
}

Tensor randn_f64(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, kF64, &g);
}

TEST(VocabParallelEmbedding, LookupAndGradientEqualOneEmbedding) {
  auto group = dist::world();
  auto full = full_table(1);
  VocabParallelEmbedding wte(*full, group);
  const Slice s = wte.vocab_slice();
  EXPECT_EQ(s.length, kVocab / group->size());
  EXPECT_EQ(s.start, group->rank() * s.length);
  EXPECT_EQ(wte.weight().shape(), (Shape{s.length, kDim}));
  EXPECT_EQ(max_abs_diff(wte.weight().data(), full->weight().data().narrow(0, s.start, s.length)),
            0.0);

  const Tensor ids = token_ids();
  const Tensor w = randn_f64({3, 7, kDim}, 2);  // L = sum(out * w), the same on every rank
  const Variable ref = (*full)(Variable(ids));
  sum(mul(ref, Variable(w))).backward();
  const Variable out = wte(Variable(ids));
  // One row on one rank, zeros on the others: the sum is the row itself, exactly.
  EXPECT_EQ(out.shape(), (Shape{3, 7, kDim}));
  EXPECT_EQ(max_abs_diff(out.data(), ref.data()), 0.0);
  sum(mul(out, Variable(w))).backward();
  EXPECT_LT(max_abs_diff(wte.weight().grad(), full->weight().grad().narrow(0, s.start, s.length)),
            1e-12);
}

// The lookup's one collective is the forward all-reduce of [B, S, C] (g); its backward sends
// nothing. A ring sends 2 (T - 1) / T of the tensor per rank.
TEST(VocabParallelEmbedding, SendsOneAllReduceOfTheOutputInForwardAndNothingInBackward) {
  auto group = dist::world();
  const int T = group->size();
  auto full = full_table(3);
  VocabParallelEmbedding wte(*full, group);
  const int64_t before = group->ledger().total_bytes();
  const Variable out = wte(Variable(token_ids()));
  const int64_t forward = group->ledger().total_bytes() - before;
  EXPECT_EQ(forward, 2 * (T - 1) * 3 * 7 * kDim * 8 / T);
  sum(out).backward();
  EXPECT_EQ(group->ledger().total_bytes() - before - forward, 0);
}

// logits_r = f(x) wte_r^T on every rank; the loss over them (class-parallel over the vocabulary)
// against x wte^T and cross_entropy on one process: the logits, gathered; x's gradient (the f
// all-reduce sums the ranks' parts); the table's gradient from the lookup and the projection.
TEST(VocabParallelLMHead, TiedLogitsLossAndGradientsEqualOneProcess) {
  auto group = dist::world();
  auto full = full_table(4);
  auto wte = std::make_shared<VocabParallelEmbedding>(*full, group);
  VocabParallelLMHead head(wte);
  const Slice s = head.vocab_slice();
  const Tensor ids = token_ids();
  const Tensor targets = from_vector<int64_t>(
      [] {
        std::vector<int64_t> y;
        for (int64_t i = 0; i < 21; ++i) y.push_back((i * 7 + 3) % kVocab);
        return y;
      }(),
      {3, 7});
  const Tensor mix = randn_f64({3, 7, kDim}, 5);

  // One process: h = wte[ids] * mix (a stand-in for the blocks), logits = h wte^T.
  Variable ref_h = mul((*full)(Variable(ids)), Variable(mix));
  Variable ref_x(ref_h.data(), true);
  const Variable ref_logits = linear(ref_x, full->weight(), Variable());
  const Variable ref_loss =
      cross_entropy(reshape(ref_logits, {-1, kVocab}), targets.reshape({-1}));
  ref_loss.backward();
  ref_h.backward(ref_x.grad());

  Variable h = mul((*wte)(Variable(ids)), Variable(mix));
  Variable x(h.data(), true);
  const Variable logits = head(x);
  EXPECT_EQ(logits.shape(), (Shape{3, 7, s.length}));
  EXPECT_LT(max_abs_diff(logits.data(), ref_logits.data().narrow(2, s.start, s.length)), 1e-12);
  EXPECT_LT(max_abs_diff(head.gather_logits(logits.data()), ref_logits.data()), 1e-12);
  const Variable loss = head.loss()(logits, targets);
  EXPECT_NEAR(loss.item(), ref_loss.item(), 1e-12);
  loss.backward();
  EXPECT_LT(max_abs_diff(x.grad(), ref_x.grad()), 1e-12);
  h.backward(x.grad());
  EXPECT_LT(max_abs_diff(wte->weight().grad(), full->weight().grad().narrow(0, s.start, s.length)),
            1e-12);
  // Only the tied table: the head has no parameter of its own.
  EXPECT_TRUE(head.parameters().empty());
}

// Finite differences of the loss over the head's split logits with respect to x (f64): x is the
// same on every rank and perturbed alike, so the all-reduce in f's backward is what makes the
// analytic gradient the whole one.
TEST(VocabParallelLMHead, Gradcheck) {
  auto group = dist::world();
  auto wte = std::make_shared<VocabParallelEmbedding>(*full_table(6), group);
  VocabParallelLMHead head(wte);
  const ClassParallelCrossEntropy loss_fn = head.loss(Reduction::kSum);
  const Tensor targets = from_vector<int64_t>({0, 11, 5, 6, 3, 9}, {2, 3});
  const GradcheckResult result = gradcheck(
      [&](const std::vector<Variable>& in) { return loss_fn(head(in[0]), targets); },
      {randn_f64({2, 3, kDim}, 7)});
  EXPECT_TRUE(result.ok) << result.message;
}

// The head's one collective is f's backward all-reduce of dL/dx, [B, S, C]; the loss's are two
// all-reduces of B x S and 3 B x S values (never the logits).
TEST(VocabParallelLMHead, SendsTheInputGradientAndTheLossSumsOnly) {
  auto group = dist::world();
  const int T = group->size();
  auto wte = std::make_shared<VocabParallelEmbedding>(*full_table(8), group);
  VocabParallelLMHead head(wte);
  Variable x(randn_f64({3, 7, kDim}, 9), true);
  const int64_t start = group->ledger().total_bytes();
  const Variable logits = head(x);
  EXPECT_EQ(group->ledger().total_bytes() - start, 0);
  const Variable loss = head.loss()(logits, token_ids());
  const int64_t loss_bytes = group->ledger().total_bytes() - start;
  EXPECT_EQ(loss_bytes, 2 * (T - 1) * (21 + 3 * 21) * 8 / T);
  loss.backward();
  EXPECT_EQ(group->ledger().total_bytes() - start - loss_bytes, 2 * (T - 1) * 21 * kDim * 8 / T);
}

TEST(VocabParallelEmbedding, StateDictHoldsTheWholeTableBothWays) {
  auto group = dist::world();
  auto full = full_table(10);
  VocabParallelEmbedding wte(*full, group);
  const StateDict state = wte.state_dict();
  ASSERT_TRUE(state.contains("weight"));
  EXPECT_EQ(max_abs_diff(state.at("weight"), full->weight().data()), 0.0);
  StateDict changed;
  changed.set("weight", mul(full->weight().data(), -2.0));
  wte.load_state_dict(changed);
  const Slice s = wte.vocab_slice();
  EXPECT_EQ(max_abs_diff(wte.weight().data(), changed.at("weight").narrow(0, s.start, s.length)), 0.0);
  EXPECT_EQ(max_abs_diff(wte.state_dict().at("weight"), changed.at("weight")), 0.0);
}

// A rank keeps V/T rows: the full table it was made from is gone once the caller drops it.
TEST(VocabParallelEmbedding, ARankHoldsOnlyItsRows) {
  auto group = dist::world();
  const int T = group->size();
  const int64_t vocab = 600 * T, dim = 64;
  const int64_t base = memory_stats(Device::cpu()).current_bytes;
  std::unique_ptr<VocabParallelEmbedding> wte;
  {
    nn::Embedding full(vocab, dim);
    wte = std::make_unique<VocabParallelEmbedding>(full, group);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).current_bytes - base, 600 * dim * 4);
}

TEST(VocabParallelEmbedding, BadSizesAndIdsAreNamed) {
  auto group = dist::world();
  const int T = group->size();
  const std::string t = std::to_string(T);
  nn::Embedding odd(kVocab + 1, kDim);  // 13: no T > 1 divides it
  expect_error([&] { VocabParallelEmbedding(odd, group); },
               "VocabParallelEmbedding: the vocabulary of 13 tokens does not divide by the "
               "tensor-parallel size T = " + t);
  VocabParallelEmbedding wte(*full_table(11), group);
  expect_error([&] { wte(Variable(from_vector<int64_t>({3, 12}, {1, 2}))); },
               "VocabParallelEmbedding: token ids span [3, 12] but the vocabulary has 12 tokens");
  expect_error([&] { wte(Variable(from_vector<int64_t>({-1, 0}, {2}))); },
               "token ids span [-1, 0]");
  auto shared = std::make_shared<VocabParallelEmbedding>(*full_table(12), group);
  VocabParallelLMHead head(shared);
  expect_error([&] { head(Variable(zeros({2, kDim + 1}, kF64))); },
               "VocabParallelLMHead::forward: expected 5 input features, got shape [2, 6]");
  expect_error([&] { head.gather_logits(zeros({2, kVocab}, kF64)); },
               "expected this rank's logits [..., " + std::to_string(kVocab / T) + "]");
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
