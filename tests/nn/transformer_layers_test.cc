// The transformer's layers as modules: LayerNorm, GELU and Embedding (parameters, their names
// and initialization, options, forward against the functional ops, errors), and weight tying
// through modules, as a GPT ties its token embedding to its output projection.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "nn/nn.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace nn {
namespace {

using testing::expect_error;

Tensor random(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kF32, &gen);
}

TEST(LayerNorm, ParametersStartAsOnesAndZerosAndForwardIsTheOp) {
  LayerNorm ln(7);
  const auto named = ln.named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].first, "weight");
  EXPECT_EQ(named[1].first, "bias");
  EXPECT_TRUE(allclose(ln.weight().data(), ones({7}), 0, 0));
  EXPECT_TRUE(allclose(ln.bias().data(), zeros({7}), 0, 0));
  EXPECT_EQ(ln.extra_repr(), "(7), eps=1e-05");
  const Variable x(random({2, 3, 7}, 1), true);
  const Variable y = ln(x);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(allclose(y.data(), layer_norm(x.data(), Tensor(), Tensor()).output, 0, 0));
  sum(mul(y, Variable(random({2, 3, 7}, 2)))).backward();
  EXPECT_TRUE(ln.weight().grad().defined());
  EXPECT_TRUE(ln.bias().grad().defined());
  EXPECT_TRUE(x.grad().defined());
}

TEST(LayerNorm, OptionsDecideWhichParametersExist) {
  LayerNorm plain(LayerNormOptions(4).elementwise_affine(false).eps(1e-6));
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_EQ(plain.extra_repr(), "(4), eps=1e-06, elementwise_affine=false");
  LayerNorm no_bias(LayerNormOptions(4).bias(false));
  ASSERT_EQ(no_bias.parameters().size(), 1u);
  EXPECT_FALSE(no_bias.bias().defined());
  const Tensor x = random({3, 4}, 3);
  EXPECT_TRUE(allclose(plain(x).data(), layer_norm(x, Tensor(), Tensor(), 1e-6).output, 0, 0));
}

TEST(LayerNorm, FollowsTheModelsDtype) {
  // Not kept in f32 as BatchNorm is: a GPT's parameters stay one dtype (ZeRO-3's flat
  // parameter), and the kernels compute in f32 anyway.
  LayerNorm ln(5);
  ln.to(kBF16);
  EXPECT_EQ(ln.weight().dtype(), kBF16);
  EXPECT_EQ(ln(random({2, 5}, 4).to(kBF16)).dtype(), kBF16);
}

TEST(LayerNorm, BadArgumentsAreClearErrors) {
  expect_error([] { LayerNorm ln(0); }, "LayerNorm: normalized_size must be positive, got 0");
  expect_error([] { LayerNorm ln(LayerNormOptions(3).eps(-1)); }, "eps must be positive, got -1");
  LayerNorm ln(6);
  expect_error([&] { ln(random({2, 5}, 5)); }, "LayerNorm(6): expected input [..., 6], got [2, 5]");
}

TEST(GELU, DefaultIsPyTorchsExactFormAndTanhIsAnOption) {
  const Tensor x = random({4, 9}, 6);
  GELU exact;
  GELU approximate(GeluApproximate::kTanh);
  EXPECT_EQ(exact.extra_repr(), "");
  EXPECT_EQ(approximate.extra_repr(), "approximate='tanh'");
  EXPECT_TRUE(exact.parameters().empty());
  EXPECT_TRUE(allclose(exact(x).data(), gelu(x, GeluApproximate::kNone), 0, 0));
  EXPECT_TRUE(allclose(approximate(x).data(), gelu(x, GeluApproximate::kTanh), 0, 0));
  EXPECT_FALSE(allclose(exact(x).data(), approximate(x).data(), 0, 0));
}

// The sample standard deviation of a tensor's values.
double sample_std(const Tensor& t) { return std::sqrt(var(t.to(kF64)).item()); }

TEST(Embedding, WeightIsNormalAndForwardPicksRows) {
  manual_seed(7);
  Embedding emb(1000, 16);
  ASSERT_EQ(emb.named_parameters().size(), 1u);
  EXPECT_EQ(emb.named_parameters()[0].first, "weight");
  EXPECT_EQ(emb.weight().shape(), Shape({1000, 16}));
  EXPECT_EQ(emb.extra_repr(), "1000, 16");
  EXPECT_NEAR(sample_std(emb.weight().data()), 1.0, 0.03);  // N(0, 1) as PyTorch's
  Embedding gpt(EmbeddingOptions(1000, 16).init_std(0.02));
  EXPECT_NEAR(sample_std(gpt.weight().data()), 0.02, 0.0006);
  const Tensor ids = from_vector<int64_t>({5, 999, 5, 0}, {2, 2});
  const Variable out = emb(ids);
  EXPECT_EQ(out.shape(), Shape({2, 2, 16}));
  EXPECT_TRUE(allclose(out.data().select(0, 1).select(0, 0), emb.weight().data().select(0, 5), 0, 0));
}

TEST(Embedding, GradientReachesOnlyTheRowsOfTheBatchsTokens) {
  Embedding emb(10, 3);
  const Tensor ids = from_vector<int64_t>({2, 7, 2}, {3});
  sum(emb(ids)).backward();
  const Tensor g = emb.weight().grad();
  for (int64_t v = 0; v < 10; ++v) {
    const double expected = v == 2 ? 2.0 : v == 7 ? 1.0 : 0.0;  // token 2 twice
    EXPECT_TRUE(allclose(g.select(0, v), full({3}, expected), 0, 0)) << "row " << v;
  }
}

TEST(Embedding, BadArgumentsAreClearErrors) {
  expect_error([] { Embedding emb(0, 4); }, "num_embeddings and embedding_dim must be positive");
  Embedding emb(10, 4);
  expect_error([&] { emb(from_vector<int64_t>({3, 10}, {2})); },
               "index 10 (element 1 of indices with shape [2]) is out of range for an embedding "
               "of V = 10 rows");
  expect_error([&] { emb(from_vector<int64_t>({3}, {1}).to(kI32)); },
               "indices must be i64 (token ids), got i32");
}

// The smallest tied language model: tokens -> embedding -> LayerNorm -> GELU -> logits through
// the embedding's own weight, transposed (GPT-2's lm_head).
class TiedLM : public Module {
 public:
  TiedLM(int64_t vocab, int64_t width) {
    wte_ = register_module<Embedding>("wte", EmbeddingOptions(vocab, width).init_std(0.5));
    ln_ = register_module<LayerNorm>("ln", width);
    act_ = register_module<GELU>("act", GeluApproximate::kTanh);
  }
  Variable forward(const Variable& ids) override {
    const Variable h = (*act_)((*ln_)((*wte_)(ids)));
    return matmul(h, transpose(wte_->weight(), 0, 1));
  }
  std::shared_ptr<Embedding> wte_;
  std::shared_ptr<LayerNorm> ln_;
  std::shared_ptr<GELU> act_;
};

TEST(WeightTying, EmbeddingAndOutputProjectionGradientsAddUp) {
  manual_seed(8);
  TiedLM model(11, 6);
  EXPECT_EQ(model.parameters().size(), 3u);  // wte.weight, ln.weight, ln.bias
  const Tensor ids = from_vector<int64_t>({3, 9, 3, 0, 10}, {5});
  const Tensor target = from_vector<int64_t>({9, 3, 0, 10, 3}, {5});
  cross_entropy(model(ids), target).backward();
  // The same model with the projection's weight a separate copy of the embedding's.
  const Tensor w = model.wte_->weight().data();
  Variable in(w.clone(), true), out(w.clone(), true);
  LayerNorm ln(6);
  const Variable h = gelu(layer_norm(embedding(in, ids), ln.weight(), ln.bias()),
                          GeluApproximate::kTanh);
  cross_entropy(matmul(h, transpose(out, 0, 1)), target).backward();
  EXPECT_TRUE(allclose(model.wte_->weight().grad(), add(in.grad(), out.grad()), 1e-6, 1e-7));
  EXPECT_TRUE(allclose(model.ln_->weight().grad(), ln.weight().grad(), 1e-6, 1e-7));
}

}  // namespace
}  // namespace nn
}  // namespace tessera
