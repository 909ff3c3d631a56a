// Class-parallel cross-entropy against the ordinary cross_entropy on the full logits: loss and
// gradient (f64, 1e-12), with and without label smoothing, every reduction, targets in every
// rank's slice, logits large enough to overflow a naive exp, and argmax / accuracy with ties.
// Run on 2 and 3 ranks (11 classes: 6 + 5 and 4 + 4 + 3). The same loss as Megatron-LM's
// vocab_parallel_cross_entropy: a language model's logits [B, S, V/T] split by vocabulary
// against targets [B, S] (odd B and S, every rank's slice among the targets), and its gradcheck.
#include "dist/tensor_parallel/class_parallel_cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/gradcheck.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

constexpr int64_t kClasses = 11;

Tensor logits_table(int64_t rows, double scale) {
  Generator g(77);
  return mul(randn({rows, kClasses}, kF64, &g), scale);
}

// Targets 0, 1, ..., 10, 0, ...: every rank's slice holds some of them.
Tensor targets(int64_t rows) {
  std::vector<int64_t> y;
  for (int64_t i = 0; i < rows; ++i) y.push_back(i % kClasses);
  return from_vector<int64_t>(y, {rows});
}

TEST(ClassParallelCrossEntropy, LossAndGradientEqualCrossEntropy) {
  auto group = dist::world();
  const Slice s = slice_of(kClasses, group->size(), group->rank(), "test");
  const Tensor y = targets(13);
  for (double scale : {1.0, 1000.0}) {  // 1000: exp(x) overflows unless the max is subtracted
    for (double eps : {0.0, 0.1}) {
      for (Reduction reduction : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
        const Tensor full = logits_table(13, scale);
        Variable ref_logits(full, true);
        Variable local(full.narrow(1, s.start, s.length).contiguous(), true);
        const Variable ref = cross_entropy(ref_logits, y, reduction, eps);
        ClassParallelCrossEntropy loss_fn(group, s, kClasses, reduction, eps);
        const Variable loss = loss_fn(local, y);
        ASSERT_TRUE(std::isfinite(sum(loss.data()).item()));
        EXPECT_LT(max_abs_diff(loss.data(), ref.data()), 1e-12 * scale)
            << "scale " << scale << " eps " << eps;
        const Tensor g = reduction == Reduction::kNone ? arange(13, kF64) : scalar_tensor(1.5, kF64);
        ref.backward(g);
        loss.backward(g);
        EXPECT_LT(max_abs_diff(local.grad(), ref_logits.grad().narrow(1, s.start, s.length)), 1e-12)
            << "scale " << scale << " eps " << eps;
      }
    }
  }
}

TEST(ClassParallelCrossEntropy, ArgmaxAndAccuracyOverAllClasses) {
  auto group = dist::world();
  const Slice s = slice_of(kClasses, group->size(), group->rank(), "test");
  ClassParallelCrossEntropy loss_fn(group, s, kClasses);
  Tensor full = logits_table(13, 1.0);
  // Row 0: a tie between the first and the last class (argmax takes the first).
  full.select(0, 0).fill_(0.0);
  full.select(0, 0).narrow(0, 0, 1).fill_(5.0);
  full.select(0, 0).narrow(0, kClasses - 1, 1).fill_(5.0);
  const Tensor local = full.narrow(1, s.start, s.length).contiguous();
  const Tensor expected = argmax(full, 1);
  EXPECT_EQ(max_abs_diff(loss_fn.argmax(local).to(kF64), expected.to(kF64)), 0.0);
  EXPECT_EQ(loss_fn.argmax(local).to_vector<int64_t>()[0], 0);
  const Tensor y = targets(13);
  EXPECT_EQ(loss_fn.num_correct(local, y),
            static_cast<int64_t>(sum(eq(expected, y).to(kI64)).item()));
}

// Under bf16 autocast (the logits of a bf16 head), the loss computes in f32 as cross_entropy
// does, and the gradient comes back in the logits' dtype.
TEST(ClassParallelCrossEntropy, UnderAutocastComputesInF32) {
  auto group = dist::world();
  const Slice s = slice_of(kClasses, group->size(), group->rank(), "test");
  const Tensor full = logits_table(13, 3.0).to(kBF16);
  const Tensor y = targets(13);
  Variable ref_logits(full, true), local(full.narrow(1, s.start, s.length).contiguous(), true);
  Variable ref, loss;
  {
    AutocastGuard autocast(kBF16);
    ref = cross_entropy(ref_logits, y, Reduction::kMean, 0.1);
    loss = ClassParallelCrossEntropy(group, s, kClasses, Reduction::kMean, 0.1)(local, y);
  }
  EXPECT_EQ(loss.dtype(), kF32);
  EXPECT_LT(max_abs_diff(loss.data(), ref.data()), 1e-5);
  ref.backward();
  loss.backward();
  EXPECT_EQ(local.grad().dtype(), kBF16);
  EXPECT_LT(max_abs_diff(local.grad().to(kF32),
                         ref_logits.grad().narrow(1, s.start, s.length).to(kF32)),
            1e-3);  // bf16 rounding of gradients below 1
}

// Finite differences (f64) of the class-parallel loss with label smoothing. The loss depends
// on every rank's logits, so the checked input is the full logits, the same on every rank and
// perturbed alike; each rank takes its slice after copy_to_parallel_region, whose backward sums
// the ranks' slice gradients into the full gradient the differences see.
TEST(ClassParallelCrossEntropy, Gradcheck) {
  auto group = dist::world();
  const Slice s = slice_of(kClasses, group->size(), group->rank(), "test");
  const ClassParallelCrossEntropy loss_fn(group, s, kClasses, Reduction::kSum, 0.2);
  const Tensor y = targets(5);
  const GradcheckResult result = gradcheck(
      [&](const std::vector<Variable>& in) {
        return loss_fn(narrow(copy_to_parallel_region(in[0], group), 1, s.start, s.length), y);
      },
      {logits_table(5, 1.0)});
  EXPECT_TRUE(result.ok) << result.message;
}

// A language model's logits [B, S, V_r] (B = 3, S = 5: rows that are no multiple of T) against
// cross_entropy over the full logits [B S, V]: the per-token losses in the targets' shape, their
// mean and sum, and the gradient of each. V = 12 splits 6 + 6 and 4 + 4 + 4 (the GPT's vocabulary
// divides by T); 11 splits unevenly and is the same loss.
TEST(VocabParallelCrossEntropy, LanguageModelLogitsEqualCrossEntropy) {
  auto group = dist::world();
  for (int64_t vocab : {12, 11}) {
    const Slice s = slice_of(vocab, group->size(), group->rank(), "test");
    Generator g(5);
    const Tensor full = mul(randn({3, 5, vocab}, kF64, &g), 4.0);
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < 15; ++i) ids.push_back((i * 7) % vocab);  // every token, so every slice
    const Tensor y = from_vector<int64_t>(ids, {3, 5});
    for (Reduction reduction : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
      Variable ref_logits(full, true);
      Variable local(full.narrow(2, s.start, s.length).contiguous(), true);
      const Variable ref = cross_entropy(reshape(ref_logits, {-1, vocab}), y.reshape({-1}), reduction);
      const Variable loss = ClassParallelCrossEntropy(group, s, vocab, reduction)(local, y);
      const Shape want = reduction == Reduction::kNone ? Shape{3, 5} : Shape{};
      EXPECT_EQ(loss.shape(), want);
      EXPECT_LT(max_abs_diff(loss.data().reshape({-1}), ref.data().reshape({-1})), 1e-12)
          << "vocab " << vocab;
      const Tensor upstream = reduction == Reduction::kNone ? arange(15, kF64) : scalar_tensor(0.7, kF64);
      ref.backward(upstream);
      loss.backward(upstream.reshape(want));
      EXPECT_LT(max_abs_diff(local.grad(), ref_logits.grad().narrow(2, s.start, s.length)), 1e-12)
          << "vocab " << vocab;
    }
    // The predicted token of each position, over the whole vocabulary.
    ClassParallelCrossEntropy loss_fn(group, s, vocab);
    const Tensor local = full.narrow(2, s.start, s.length).contiguous();
    const Tensor predicted = loss_fn.argmax(local);
    EXPECT_EQ(predicted.shape(), (Shape{3, 5}));
    EXPECT_EQ(max_abs_diff(predicted.to(kF64), argmax(full, 2).to(kF64)), 0.0);
  }
}

// Finite differences (f64) of the mean loss over [2, 3, V] logits, as the class-parallel
// Gradcheck above: the full logits, each rank's slice of the vocabulary after the copy.
TEST(VocabParallelCrossEntropy, Gradcheck) {
  auto group = dist::world();
  constexpr int64_t kVocab = 12;
  const Slice s = slice_of(kVocab, group->size(), group->rank(), "test");
  const ClassParallelCrossEntropy loss_fn(group, s, kVocab);
  const Tensor y = from_vector<int64_t>({0, 11, 4, 7, 2, 9}, {2, 3});
  Generator g(6);
  const GradcheckResult result = gradcheck(
      [&](const std::vector<Variable>& in) {
        return loss_fn(narrow(copy_to_parallel_region(in[0], group), 2, s.start, s.length), y);
      },
      {randn({2, 3, kVocab}, kF64, &g)});
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(ClassParallelCrossEntropy, BadInputIsNamed) {
  auto group = dist::world();
  const Slice s = slice_of(kClasses, group->size(), group->rank(), "test");
  ClassParallelCrossEntropy loss_fn(group, s, kClasses);
  testing::expect_error([&] { loss_fn(Variable(zeros({2, kClasses})), arange(2, kI64)); },
                        "expected this rank's logits [N, " + std::to_string(s.length) + "]");
  const Tensor local = zeros({2, s.length});
  testing::expect_error([&] { loss_fn(Variable(local), full({2}, 11, kI64)); },
                        "target class out of range: values span [11, 11] but there are 11 classes");
  testing::expect_error([&] { ClassParallelCrossEntropy(group, Slice{0, 1}, kClasses); },
                        "holds classes [");
  testing::expect_error([&] { loss_fn(Variable(zeros({2, 3, s.length})), zeros({3, 2}, kI64)); },
                        "expected target [2, 3] of class indices (the logits' shape without its "
                        "classes), got shape [3, 2]");
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
