// The transformer layers as differentiable ops: gradcheck of layer norm, GELU and embedding on
// small odd shapes; weight tying (embedding and output projection sharing one weight, the two
// gradients adding up); and their dtypes under autocast and with half-precision parameters.
#include <gtest/gtest.h>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "tests/autograd/gradcheck_util.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

TEST(Gradcheck, LayerNorm) {
  // Input, weight and bias; then without an affine map; then a weight alone. eps large enough
  // that the finite differences see a smooth function of every input.
  EXPECT_GRADCHECK([](const V& v) { return layer_norm(v[0], v[1], v[2], 1e-3); },
                   std::vector<Tensor>{r({3, 5, 7}, 1), r({7}, 2), r({7}, 3)});
  EXPECT_GRADCHECK([](const V& v) { return layer_norm(v[0], Variable(), Variable()); },
                   std::vector<Tensor>{r({5, 3}, 4)});
  EXPECT_GRADCHECK([](const V& v) { return layer_norm(v[0], v[1], Variable()); },
                   std::vector<Tensor>{r({2, 9}, 5).t(), r({2}, 6)});  // a strided input
}

TEST(Gradcheck, Gelu) {
  for (const GeluApproximate a : {GeluApproximate::kTanh, GeluApproximate::kNone}) {
    EXPECT_GRADCHECK([a](const V& v) { return gelu(v[0], a); },
                     std::vector<Tensor>{mul(r({3, 7}, 7), 2.0)});
  }
}

TEST(Gradcheck, EmbeddingWithRepeatedIndices) {
  const Tensor idx = from_vector<int64_t>({4, 0, 4, 2, 4, 0}, {2, 3});
  EXPECT_GRADCHECK([idx](const V& v) { return embedding(v[0], idx); },
                   std::vector<Tensor>{r({5, 3}, 8)});
}

// GPT-2's weight tying: tokens embedded with w [V, C] and the hidden states projected back to
// the vocabulary with w^T: one Variable used by two ops.
Variable tied_logits(const Variable& w, const Tensor& idx) {
  const Variable h = tanh(embedding(w, idx));  // [B, T, C]
  return matmul(h, transpose(w, 0, 1));         // [B, T, V]
}

TEST(Gradcheck, TiedEmbeddingAndOutputProjection) {
  const Tensor idx = from_vector<int64_t>({1, 6, 1, 3, 0, 6}, {2, 3});
  EXPECT_GRADCHECK([idx](const V& v) { return tied_logits(v[0], idx); },
                   std::vector<Tensor>{r({7, 5}, 9)});
}

TEST(WeightTying, TheGradientIsTheSumOfBothUses) {
  const Tensor idx = from_vector<int64_t>({1, 6, 1, 3, 0, 6}, {2, 3});
  const Tensor w0 = r({7, 5}, 10), g = r({2, 3, 7}, 11);
  Variable tied(w0.clone(), true);
  tied_logits(tied, idx).backward(g);
  // The same computation with the two uses on separate copies of the weight.
  Variable in(w0.clone(), true), out(w0.clone(), true);
  matmul(tanh(embedding(in, idx)), transpose(out, 0, 1)).backward(g);
  EXPECT_TRUE(allclose(tied.grad(), add(in.grad(), out.grad()), 1e-12, 1e-12));
  // Rows 2, 4 and 5 are no token of the batch: the embedding gave them nothing, the projection
  // did (every row of w^T meets every hidden state).
  EXPECT_EQ(amax(abs(in.grad().narrow(0, 2, 1))).item(), 0.0);
  EXPECT_GT(amax(abs(out.grad().narrow(0, 2, 1))).item(), 0.0);
}

TEST(Autocast, LayerNormRunsInF32AndGeluAndEmbeddingKeepTheirDtype) {
  const Variable w(ones({6}), true), b(zeros({6}), true), table(r({9, 6}, 12).to(kF32), true);
  const Variable x(r({4, 6}, 13).to(kBF16), true);
  const Tensor idx = from_vector<int64_t>({1, 8}, {2});
  Variable y, h, e;
  {
    AutocastGuard autocast(kBF16);
    y = layer_norm(x, w, b);
    h = gelu(x, GeluApproximate::kTanh);
    e = embedding(table, idx);
  }
  EXPECT_EQ(y.dtype(), kF32);   // PyTorch's autocast lists layer_norm among the f32 ops
  EXPECT_EQ(h.dtype(), kBF16);  // and GELU and embedding in none
  EXPECT_EQ(e.dtype(), kF32);
  add(sum(y), sum(h)).backward();
  EXPECT_EQ(x.grad().dtype(), kBF16);
  EXPECT_EQ(w.grad().dtype(), kF32);
  EXPECT_EQ(b.grad().dtype(), kF32);
}

TEST(HalfParameters, LayerNormAndEmbeddingGradientsTakeTheParametersDtype) {
  for (const DType half : {kF16, kBF16}) {
    const Variable w(ones({6}, half), true), b(zeros({6}, half), true);
    const Variable table(r({9, 6}, 14).to(half), true);
    const Tensor idx = from_vector<int64_t>({1, 8, 1}, {3});
    const Variable y = layer_norm(embedding(table, idx), w, b);
    EXPECT_EQ(y.dtype(), half);
    sum(y).backward();
    EXPECT_EQ(w.grad().dtype(), half);
    EXPECT_EQ(b.grad().dtype(), half);
    EXPECT_EQ(table.grad().dtype(), half);
    EXPECT_EQ(sum(b.grad().to(kF32)).item(), 18.0);  // three rows of six ones
  }
}

}  // namespace
}  // namespace tessera
