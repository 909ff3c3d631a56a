// causal_attention (tensor/ops.h): the blocked FlashAttention kernels against the plain
// reference that materializes the scores (tests/util/attention_reference.h), at lengths on and
// off the block edges and with block sizes that do not divide them; the causal property; the
// errors; and memory that grows linearly in T.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tests/util/attention_reference.h"
#include "tests/util/expect_error.h"
#include "tests/util/tensor_near.h"

namespace tessera {
namespace {

using testing::expect_error;
using testing::seeded_normal;
using testing::expect_near;
using testing::reference_attention;



struct Case {
  int64_t t;
  AttentionBlocks blocks;
};

std::string name(const Case& c, int64_t d) {
  return "T=" + std::to_string(c.t) + " D=" + std::to_string(d) + " blocks " +
         std::to_string(c.blocks.query) + "x" + std::to_string(c.blocks.key);
}

// Lengths at and around the default block (64), and blocks that do not divide them.
const Case kCases[] = {
    {1, {}},        {63, {}},       {64, {}},      {65, {}},      {200, {}},
    {65, {16, 16}}, {200, {16, 48}}, {200, {48, 16}}, {63, {17, 5}}, {200, {1, 7}},
    {17, {5, 3}},   {200, {200, 200}}, {65, {1000, 1000}},
};

TEST(CausalAttention, MatchesTheReferenceInF32) {
  for (const int64_t d : {3, 8, 64}) {
    for (const Case& c : kCases) {
      const Shape shape{2, 3, c.t, d};
      const Tensor q = seeded_normal(shape, kF32, 1), k = seeded_normal(shape, kF32, 2),
                   v = seeded_normal(shape, kF32, 3), g = seeded_normal(shape, kF32, 4);
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      const auto ref = reference_attention(q, k, v, scale, g);
      const auto got = causal_attention(q, k, v, scale, c.blocks);
      EXPECT_EQ(got.output.dtype(), kF32);
      EXPECT_EQ(got.logsumexp.shape(), (Shape{2, 3, c.t}));
      expect_near(got.output, ref.output, 1e-5, "output, " + name(c, d));
      expect_near(got.logsumexp, ref.logsumexp, 1e-5, "logsumexp, " + name(c, d));
      const auto grads =
          causal_attention_backward(g, q, k, v, got.output, got.logsumexp, scale, c.blocks);
      expect_near(grads.q, ref.grad_q, 1e-5, "grad q, " + name(c, d));
      expect_near(grads.k, ref.grad_k, 1e-5, "grad k, " + name(c, d));
      expect_near(grads.v, ref.grad_v, 1e-5, "grad v, " + name(c, d));
    }
  }
}

TEST(CausalAttention, MatchesTheReferenceInF64) {
  for (const Case& c : kCases) {
    const Shape shape{1, 2, c.t, 5};
    const Tensor q = seeded_normal(shape, kF64, 5), k = seeded_normal(shape, kF64, 6),
                 v = seeded_normal(shape, kF64, 7), g = seeded_normal(shape, kF64, 8);
    const auto ref = reference_attention(q, k, v, 0.7, g);
    const auto got = causal_attention(q, k, v, 0.7, c.blocks);
    EXPECT_EQ(got.logsumexp.dtype(), kF64);
    expect_near(got.output, ref.output, 1e-12, "output, " + name(c, 5));
    const auto grads = causal_attention_backward(g, q, k, v, got.output, got.logsumexp, 0.7,
                                                 c.blocks);
    expect_near(grads.q, ref.grad_q, 1e-12, "grad q, " + name(c, 5));
    expect_near(grads.k, ref.grad_k, 1e-12, "grad k, " + name(c, 5));
    expect_near(grads.v, ref.grad_v, 1e-12, "grad v, " + name(c, 5));
  }
}

// Large scores (scale 4 on N(0, 1) data of D = 64: |s| up to ~150, where exp alone would
// overflow f32): the running maximum keeps every exponential in range. An f32 score that large
// carries an absolute rounding error of ~|s| 1e-7, which exp turns into a relative one, hence
// 1e-4 here.
TEST(CausalAttention, LargeScoresStayFinite) {
  const Shape shape{1, 2, 130, 64};
  const Tensor q = seeded_normal(shape, kF32, 9), k = seeded_normal(shape, kF32, 10), v = seeded_normal(shape, kF32, 11);
  const auto ref = reference_attention(q, k, v, 4.0);
  expect_near(causal_attention(q, k, v, 4.0).output, ref.output, 1e-4, "output");
}

// Query t sees keys s <= t only: changing k and v after position t leaves O[..., :t+1, :]
// exactly as it was (hidden keys get probability exactly 0).
TEST(CausalAttention, FutureKeysDoNotChangeThePast) {
  const int64_t t = 150, cut = 70;
  const Shape shape{2, 2, t, 16};
  const Tensor q = seeded_normal(shape, kF32, 12), k = seeded_normal(shape, kF32, 13), v = seeded_normal(shape, kF32, 14);
  Tensor k2 = k.clone(), v2 = v.clone();
  Tensor k_tail = k2.narrow(2, cut + 1, t - cut - 1), v_tail = v2.narrow(2, cut + 1, t - cut - 1);
  k_tail.copy_(seeded_normal(k_tail.shape(), kF32, 15) * 10.0);
  v_tail.copy_(seeded_normal(v_tail.shape(), kF32, 16) * 10.0);
  for (const AttentionBlocks blocks : {AttentionBlocks{}, AttentionBlocks{16, 16}, AttentionBlocks{7, 11}}) {
    const Tensor a = causal_attention(q, k, v, 0.25, blocks).output.narrow(2, 0, cut + 1);
    const Tensor b = causal_attention(q, k2, v2, 0.25, blocks).output.narrow(2, 0, cut + 1);
    EXPECT_TRUE(allclose(a, b, 0, 0)) << "max |diff| = " << max_abs_diff(a, b);
    // And the later rows do change.
    EXPECT_GT(max_abs_diff(causal_attention(q, k, v, 0.25, blocks).output,
                           causal_attention(q, k2, v2, 0.25, blocks).output),
              1e-3);
  }
}

TEST(CausalAttention, HalfPrecisionComputesInF32) {
  const Shape shape{1, 2, 40, 8};
  const Tensor q = seeded_normal(shape, kBF16, 17), k = seeded_normal(shape, kBF16, 18), v = seeded_normal(shape, kBF16, 19);
  const auto got = causal_attention(q, k, v, 0.5);
  EXPECT_EQ(got.output.dtype(), kBF16);
  EXPECT_EQ(got.logsumexp.dtype(), kF32);
  const auto f32 = causal_attention(q.to(kF32), k.to(kF32), v.to(kF32), 0.5);
  expect_near(got.output, f32.output, 1e-2, "bf16 output");
}

TEST(CausalAttention, EmptyBatchGivesEmptyOutputs) {
  const Tensor q = zeros({0, 2, 5, 4});
  const auto got = causal_attention(q, q, q, 1.0);
  EXPECT_EQ(got.output.shape(), (Shape{0, 2, 5, 4}));
  EXPECT_EQ(got.logsumexp.shape(), (Shape{0, 2, 5}));
}

TEST(CausalAttention, ErrorsNameWhatIsWrong) {
  const Tensor q = zeros({1, 2, 5, 4});
  expect_error([&] { causal_attention(zeros({2, 5, 4}), q, q, 1.0); },
               "expected q of shape [B, H, T, D], got shape [2, 5, 4]");
  expect_error([&] { causal_attention(q, zeros({1, 2, 6, 4}), q, 1.0); },
               "q, k and v must have one shape [B, H, T, D], got q [1, 2, 5, 4], k [1, 2, 6, 4]");
  expect_error([&] { causal_attention(q, q, zeros({1, 2, 5, 3}), 1.0); }, "v [1, 2, 5, 3]");
  expect_error([&] { causal_attention(q, q.to(kF64), q, 1.0); },
               "q, k and v must have one dtype, got f32, f64, f32");
  expect_error([&] { causal_attention(q.to(kI64), q.to(kI64), q.to(kI64), 1.0); },
               "expected a floating-point tensor");
  expect_error([&] { causal_attention(q, q, q, NAN); }, "scale must be finite");
  const Tensor no_dim = zeros({1, 2, 5, 0});
  expect_error([&] { causal_attention(no_dim, no_dim, no_dim, 1.0); },
               "the head dimension D of q [1, 2, 5, 0] must be positive");
  expect_error([&] { causal_attention(q, q, q, 1.0, {0, 64}); },
               "got query = 0, key = 64");
  expect_error([&] { causal_attention(Tensor(), q, q, 1.0); }, "q is an undefined tensor");
  const auto r = causal_attention(q, q, q, 1.0);
  expect_error([&] { causal_attention_backward(zeros({1, 2, 5, 5}), q, q, q, r.output, r.logsumexp, 1.0); },
               "grad and output must have q's shape [1, 2, 5, 4], got grad [1, 2, 5, 5]");
  expect_error([&] { causal_attention_backward(q, q, q, q, r.output, zeros({1, 2, 4}), 1.0); },
               "logsumexp must have shape [1, 2, 5], got [1, 2, 4]");
}

// Bytes the forward (and, separately, the backward) allocates beyond what exists before it.
struct Peaks {
  int64_t forward, backward;
};
Peaks peak_bytes(int64_t t) {
  const Shape shape{1, 4, t, 64};
  const Tensor q = seeded_normal(shape, kF32, 20), k = seeded_normal(shape, kF32, 21), v = seeded_normal(shape, kF32, 22);
  const Tensor g = seeded_normal(shape, kF32, 23);
  const Device cpu = Device::cpu();
  reset_peak(cpu);
  int64_t before = memory_stats(cpu).current_bytes;
  const auto r = causal_attention(q, k, v, 0.125);
  Peaks p;
  p.forward = memory_stats(cpu).peak_bytes - before;
  reset_peak(cpu);
  before = memory_stats(cpu).current_bytes;
  { const auto grads = causal_attention_backward(g, q, k, v, r.output, r.logsumexp, 0.125); }
  p.backward = memory_stats(cpu).peak_bytes - before;
  return p;
}

// The forward keeps O and L (plus a block's scratch per thread), never the 4 x T x T scores;
// the backward its three gradients and a few [T, D] copies per thread. Doubling T about doubles
// both, where the scores would quadruple.
// One thread: each thread holds its own scratch, and with several the peak depends on whether
// they happened to overlap.
TEST(CausalAttention, MemoryGrowsLinearlyInT) {
  const int threads = num_threads();
  set_num_threads(1);
  const Peaks at512 = peak_bytes(512), at1024 = peak_bytes(1024);
  set_num_threads(threads);
  const int64_t scores512 = 4 * 512 * 512 * 4;  // bytes of one f32 score matrix per head
  const int64_t output512 = 4 * 512 * 64 * 4;
  EXPECT_LT(at512.forward, output512 + 4 * 512 * 4 + 512 * 1024) << "forward at T = 512";
  EXPECT_LT(at512.forward, scores512 / 2);
  EXPECT_LT(at1024.forward, 2.2 * at512.forward) << at512.forward << " -> " << at1024.forward;
  EXPECT_LT(at1024.backward, 2.2 * at512.backward) << at512.backward << " -> " << at1024.backward;
  EXPECT_LT(at512.backward, 3 * output512 + scores512 / 2) << "backward at T = 512";
}

}  // namespace
}  // namespace tessera
