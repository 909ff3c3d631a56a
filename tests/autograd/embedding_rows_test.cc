// The embedding's weight gradient given as rows (RowsGradient, autograd/node.h): the engine
// adds the looked-up rows into the weight's other gradient or straight into its .grad, and
// makes the [V, C] gradient dense only where nothing else holds one. Each case is checked
// against the gradient written out by hand (grad[idx[i]] += g[i], plus the projection's g^T h),
// and the allocator shows that no second [V, C] tensor was made for the rows.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/functions.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace {

constexpr int64_t kV = 40000, kC = 64;  // a [V, C] f32 tensor: 10.24 MB
constexpr int64_t kTableBytes = kV * kC * 4;

// grad[idx[i]] += g[i] for g [N, C]: the embedding's gradient by hand.
Tensor rows_by_hand(const Tensor& g, const std::vector<int64_t>& idx) {
  Tensor out = zeros({kV, kC});
  for (size_t i = 0; i < idx.size(); ++i) {
    Tensor row = out.narrow(0, idx[i], 1);
    add_(row, g.narrow(0, static_cast<int64_t>(i), 1));
  }
  return out;
}

// Bytes the allocator held at most during `body`, beyond what it held before.
template <typename F>
int64_t peak_during(F body) {
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  reset_peak(Device::cpu());
  body();
  return memory_stats(Device::cpu()).peak_bytes - before;
}

const std::vector<int64_t> kIdx = {39999, 7, 123, 7, 0, 20000};  // 7 twice: its rows add up

TEST(EmbeddingRows, AddedStraightIntoAnExistingGradWithoutADenseTensor) {
  manual_seed(1);
  Variable w(randn({kV, kC}), true);
  const Tensor idx = from_vector<int64_t>(kIdx, {2, 3});
  const Tensor g = randn({2, 3, kC});
  int ready = 0;
  w.register_grad_ready_hook([&](Variable&) { ++ready; });
  embedding(w, idx).backward(g);  // no .grad yet: made dense, once
  const Tensor once = rows_by_hand(g.view({6, kC}), kIdx);
  EXPECT_TRUE(allclose(w.grad(), once, 0, 0));
  EXPECT_EQ(ready, 1);
  // A second micro-batch: its rows go into .grad in place. The dense way took a zero-filled
  // [V, C] for the rows and another for their sum.
  const int64_t peak = peak_during([&] { embedding(w, idx).backward(g); });
  EXPECT_LT(peak, kTableBytes / 10) << "a [V, C] tensor was allocated for the rows";
  EXPECT_TRUE(allclose(w.grad(), mul(once, 2.0), 1e-6, 1e-6));  // row 7: ((a + b) + a) + b
  EXPECT_EQ(ready, 2);  // the hooks DDP and ZeRO rely on fire once a backward
}

TEST(EmbeddingRows, TiedWithTheOutputProjectionTheRowsJoinItsGradient) {
  manual_seed(2);
  const Tensor w0 = randn({kV, kC});
  Variable tied(w0.clone(), true);
  const Tensor idx = from_vector<int64_t>(kIdx, {6});
  const Tensor g = randn({6, kV});
  // logits = tanh(embedding) w^T: the projection's gradient of w is dense (g^T h).
  const int64_t peak = peak_during([&] { linear(tanh(embedding(tied, idx)), tied, Variable()).backward(g); });
  // One [V, C] (the projection's) and the [6, V] logits' gradient; the dense way held a second
  // [V, C] for the rows before adding the two.
  EXPECT_LT(peak, kTableBytes + kTableBytes / 2) << "the rows took a [V, C] tensor of their own";
  // The same on two copies of the weight, each use's gradient apart, added by hand.
  Variable in(w0.clone(), true), out(w0.clone(), true);
  linear(tanh(embedding(in, idx)), out, Variable()).backward(g);
  EXPECT_TRUE(allclose(tied.grad(), add(in.grad(), out.grad()), 1e-6, 1e-6));
  const Variable h = tanh(embedding(Variable(w0), idx));
  const Tensor d_h = matmul(g, w0);  // [6, C]: the projection's input gradient
  const Tensor d_e = mul(d_h, sub(ones_like(h.data()), mul(h.data(), h.data())));
  EXPECT_TRUE(allclose(in.grad(), rows_by_hand(d_e, kIdx), 1e-5, 1e-6));
}

TEST(EmbeddingRows, HooksThatReadTheGradientAndHalfWeightsGetItDense) {
  manual_seed(3);
  const Tensor idx = from_vector<int64_t>(kIdx, {6});
  const Tensor g = randn({6, kC});
  const Tensor expected = rows_by_hand(g, kIdx);
  // A hook on the leaf sees the whole gradient, each backward.
  Variable w(randn({kV, kC}), true);
  std::vector<double> seen;
  w.register_hook([&](Tensor& grad) { seen.push_back(sum(grad).item()); });
  embedding(w, idx).backward(g);
  embedding(w, idx).backward(g);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NEAR(seen[1], sum(expected).item(), 1e-3);
  EXPECT_TRUE(allclose(w.grad(), mul(expected, 2.0), 1e-6, 1e-6));
  // A bf16 weight: its gradient is rounded from the f32 sum, as before.
  Variable half(randn({kV, kC}).to(kBF16), true);
  embedding(half, idx).backward(g.to(kBF16));
  embedding(half, idx).backward(g.to(kBF16));
  EXPECT_EQ(half.grad().dtype(), kBF16);
  EXPECT_TRUE(allclose(half.grad().to(kF32), mul(rows_by_hand(g.to(kBF16).to(kF32), kIdx), 2.0)
                                                 .to(kBF16).to(kF32), 1e-2, 1e-2));
}

TEST(EmbeddingRows, TheInPlaceAddChecksWhatItIsGiven) {
  const Tensor g = randn({3, kC});
  const Tensor idx = from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_FALSE(embedding_rows_addable(zeros({10, kC}, kBF16), g));  // not g's compute type
  EXPECT_FALSE(embedding_rows_addable(zeros({kC, 10}).t(), g));     // not contiguous
  EXPECT_TRUE(embedding_rows_addable(zeros({10, kC}), g.to(kBF16)));
  Tensor grad = zeros({10, kC});
  EXPECT_THROW(embedding_backward_add_(grad, g, from_vector<int64_t>({1, 2, 10}, {3})), Error);
  embedding_backward_add_(grad, g, idx);
  EXPECT_TRUE(allclose(grad.narrow(0, 1, 3), g, 0, 0));
  EXPECT_EQ(sum(abs(grad.narrow(0, 4, 6))).item(), 0.0);
}

}  // namespace
}  // namespace tessera
