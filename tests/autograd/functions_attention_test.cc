// Gradcheck (f64 finite differences) for causal attention on small odd shapes, with blocks that
// do not divide T, so every edge of the blocked backward is crossed; the GPT form on [B, T, 3C]
// against the same attention composed from views.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "tests/autograd/gradcheck_util.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

TEST(Gradcheck, CausalAttention) {
  uint64_t seed = 100;
  for (const int64_t t : {1, 5, 17}) {
    for (const int64_t d : {3, 8}) {
      // At T = 17 blocks of 4x3 and 6x6 cross every edge; the one-block default and the
      // smallest blocks run on the shorter lengths (each gradcheck runs 2 forwards per element).
      std::vector<AttentionBlocks> all{{4, 3}, {6, 6}};
      if (t <= 5) all.insert(all.end(), {AttentionBlocks{}, AttentionBlocks{1, 2}});
      for (const AttentionBlocks blocks : all) {
        const Shape shape{1, 2, t, d};
        EXPECT_GRADCHECK(
            [blocks](const V& v) { return causal_attention(v[0], v[1], v[2], 0.6, blocks); },
            std::vector<Tensor>{r(shape, seed), r(shape, seed + 1), r(shape, seed + 2)});
        seed += 3;
      }
    }
  }
}

// By positions: two runs of queries (head-tail's shape) against keys partly before, across and
// after them, so that some rows see no key; blocks that do not divide the lengths.
TEST(Gradcheck, CausalAttentionByPositions) {
  const AttentionPositions queries{{{2, 3}, {9, 2}}}, keys{{{0, 4}, {6, 2}}};
  for (const AttentionBlocks blocks : {AttentionBlocks{}, AttentionBlocks{2, 3}}) {
    EXPECT_GRADCHECK(
        [&](const V& v) { return causal_attention(v[0], v[1], v[2], 0.6, queries, keys, blocks); },
        std::vector<Tensor>{r({1, 2, 5, 3}, 7), r({1, 2, 6, 3}, 8), r({1, 2, 6, 3}, 9)});
  }
  const AttentionPositions early = AttentionPositions::contiguous(0, 5),
                           late = AttentionPositions::contiguous(3, 6);
  EXPECT_GRADCHECK(
      [&](const V& v) { return causal_attention(v[0], v[1], v[2], 0.6, early, late, {2, 2}); },
      std::vector<Tensor>{r({1, 1, 5, 3}, 10), r({1, 1, 6, 3}, 11), r({1, 1, 6, 3}, 12)});
}

// A batch of two, and non-contiguous inputs (transposed views, as a head split gives).
TEST(Gradcheck, CausalAttentionOnViews) {
  EXPECT_GRADCHECK([](const V& v) { return causal_attention(v[0], v[1], v[2]); },
                   std::vector<Tensor>{r({2, 7, 3, 4}, 1).transpose(1, 2),
                                       r({2, 7, 3, 4}, 2).transpose(1, 2),
                                       r({2, 7, 3, 4}, 3).transpose(1, 2)});
}

TEST(Gradcheck, CausalSelfAttention) {
  for (const AttentionBlocks blocks : {AttentionBlocks{}, AttentionBlocks{2, 3}}) {
    EXPECT_GRADCHECK([blocks](const V& v) { return causal_self_attention(v[0], 2, blocks); },
                     std::vector<Tensor>{r({2, 5, 3 * 2 * 3}, 4)});
  }
}

// The fused head split and merge against the same steps written with views.
TEST(CausalSelfAttention, EqualsSplitAttendMerge) {
  const int64_t b = 2, t = 9, h = 3, d = 4, c = h * d;
  const Variable qkv(r({b, t, 3 * c}, 5), /*requires_grad=*/true);
  const Variable y = causal_self_attention(qkv, h);
  EXPECT_EQ(y.shape(), (Shape{b, t, c}));
  const Tensor g = r({b, t, c}, 6);
  y.backward(g);
  const Tensor fused_grad = qkv.grad();

  const Variable qkv2(qkv.data(), true);
  const auto parts = split(qkv2, c, 2);
  auto heads = [&](const Variable& x) { return transpose(reshape(x, {b, t, h, d}), 1, 2); };
  const Variable o = causal_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                      1.0 / std::sqrt(4.0));
  const Variable y2 = reshape(contiguous(transpose(o, 1, 2)), {b, t, c});
  EXPECT_LT(max_abs_diff(y.data(), y2.data()), 1e-12);
  y2.backward(g);
  EXPECT_LT(max_abs_diff(fused_grad, qkv2.grad()), 1e-12);
}

TEST(CausalSelfAttention, ErrorsNameTheShape) {
  const Variable qkv(r({2, 5, 18}, 7));
  try {
    causal_self_attention(qkv, 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("18 is not a multiple of 3 x 4"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(causal_self_attention(Variable(r({10, 18}, 8)), 2), Error);
}

// Autocast runs the op in its low dtype (PyTorch's scaled_dot_product_attention does too).
TEST(CausalSelfAttention, AutocastLowersPrecision) {
  const Variable qkv(r({1, 4, 12}, 9).to(kF32), true);
  Variable y;
  {
    AutocastGuard autocast(kBF16);
    y = causal_self_attention(qkv, 2);
  }
  EXPECT_EQ(y.dtype(), kBF16);
  sum(to(y, kF32)).backward();
  EXPECT_EQ(qkv.grad().dtype(), kF32);
}

}  // namespace
}  // namespace tessera
