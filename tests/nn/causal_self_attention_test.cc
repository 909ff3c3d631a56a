// nn::CausalSelfAttention: GPT-2's parameter names and shapes, its output against the Linears
// and the plain reference attention composed by hand, causality end to end, and its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "nn/causal_self_attention.h"
#include "tensor/ops.h"
#include "tests/util/attention_reference.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace {

Tensor random(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kF64, &gen);
}

TEST(CausalSelfAttention, HasGpt2sParameterNames) {
  nn::CausalSelfAttention attn(12, 3);
  const auto params = attn.named_parameters();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].first, "c_attn.weight");
  EXPECT_EQ(params[0].second.shape(), (Shape{36, 12}));
  EXPECT_EQ(params[1].first, "c_attn.bias");
  EXPECT_EQ(params[1].second.shape(), (Shape{36}));
  EXPECT_EQ(params[2].first, "c_proj.weight");
  EXPECT_EQ(params[2].second.shape(), (Shape{12, 12}));
  EXPECT_EQ(params[3].first, "c_proj.bias");
  EXPECT_EQ(attn.n_head(), 3);
}

// c_proj(merge(attention(split(c_attn(x))))) with the reference attention, in f64.
TEST(CausalSelfAttention, EqualsLinearsAroundTheReferenceAttention) {
  const int64_t b = 2, t = 11, c = 12, h = 3, d = 4;
  nn::CausalSelfAttention attn(c, h);
  attn.to(kF64);
  const Tensor x = random({b, t, c}, 1);
  const Tensor y = attn(Variable(x)).data();

  const Tensor qkv = linear(Variable(x), attn.c_attn()->weight(), attn.c_attn()->bias()).data();
  auto heads = [&](int64_t i) {
    return qkv.narrow(2, i * c, c).reshape({b, t, h, d}).transpose(1, 2).contiguous();
  };
  const auto ref = testing::reference_attention(heads(0), heads(1), heads(2), 1.0 / std::sqrt(4.0));
  const Tensor merged = ref.output.transpose(1, 2).contiguous().view({b, t, c});
  const Tensor expected =
      linear(Variable(merged), attn.c_proj()->weight(), attn.c_proj()->bias()).data();
  EXPECT_LT(max_abs_diff(y, expected), 1e-12);
}

// Output position t depends on inputs 0..t only; gradients reach every parameter.
TEST(CausalSelfAttention, IsCausalAndTrains) {
  const int64_t t = 9, cut = 4;
  nn::CausalSelfAttention attn(8, 2);
  const Tensor x = random({1, t, 8}, 2).to(kF32);
  Tensor x2 = x.clone();
  x2.narrow(1, cut + 1, t - cut - 1).copy_(random({1, t - cut - 1, 8}, 3).to(kF32));
  const Variable y = attn(Variable(x));
  const Tensor y2 = attn(Variable(x2)).data();
  EXPECT_EQ(max_abs_diff(y.data().narrow(1, 0, cut + 1), y2.narrow(1, 0, cut + 1)), 0.0);
  EXPECT_GT(max_abs_diff(y.data(), y2), 1e-4);
  sum(square(y)).backward();
  for (const auto& [name, p] : attn.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_GT(amax(abs(p.grad())).item(), 0.0) << name;
  }
}

TEST(CausalSelfAttention, ErrorsNameTheShapes) {
  testing::expect_error([] { nn::CausalSelfAttention(10, 3); },
                        "n_embd must be a positive multiple of n_head, got n_embd = 10, n_head = 3");
  nn::CausalSelfAttention attn(8, 2);
  testing::expect_error([&] { attn(Variable(zeros({2, 5, 6}))); },
                        "CausalSelfAttention(8, 2): expected input [B, T, 8], got shape [2, 5, 6]");
}

}  // namespace
}  // namespace tessera
