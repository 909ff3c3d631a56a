// Autocast: each op's output dtype per the policy table (f16 and bf16), gradients reaching f32
// parameters in f32, the cast cache (a parameter used twice is cast once), nesting and disabled
// regions, gradcheck of the cast, and a small MLP trained under autocast tracking f32 training.
#include "autograd/autocast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tests/autograd/gradcheck_util.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

Variable param(const Shape& shape, uint64_t seed, DType dtype = kF32) {
  Generator g(seed);
  return Variable(mul(randn(shape, dtype, &g), 0.5), /*requires_grad=*/true);
}

Variable input(const Shape& shape, uint64_t seed, DType dtype = kF32) {
  Generator g(seed);
  return Variable(randn(shape, dtype, &g));
}

class AutocastDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(AutocastDtypes, LowerPrecisionOps) {
  const DType low = GetParam();
  const Variable x = input({4, 6}, 1), w = param({3, 6}, 2), b = param({3}, 3);
  const Variable img = input({2, 3, 5, 5}, 4), k = param({4, 3, 3, 3}, 5), kb = param({4}, 6);
  AutocastGuard autocast(low);
  EXPECT_EQ(linear(x, w, b).dtype(), low);
  EXPECT_EQ(matmul(x, transpose(w, 0, 1)).dtype(), low);
  EXPECT_EQ(matmul(input({2, 4, 6}, 7), input({2, 6, 3}, 8)).dtype(), low);  // bmm
  EXPECT_EQ(conv2d(img, k, kb).dtype(), low);
  // Low-precision inputs stay low; f64 is never cast.
  EXPECT_EQ(linear(x, w, b).dtype(), low);
  EXPECT_EQ(matmul(input({2, 3}, 9, kF64), input({3, 2}, 10, kF64)).dtype(), kF64);
}

TEST_P(AutocastDtypes, F32Ops) {
  const DType low = GetParam();
  AutocastGuard autocast(low);
  const Variable h = input({4, 5}, 11, low);
  const Variable positive = Variable(add(abs(h.data()), 0.5));
  const Tensor target = from_vector<int64_t>({0, 2, 4, 1}, {4});
  EXPECT_EQ(positive.dtype(), low);
  EXPECT_EQ(softmax(h, 1).dtype(), kF32);
  EXPECT_EQ(log_softmax(h, 1).dtype(), kF32);
  EXPECT_EQ(exp(h).dtype(), kF32);
  EXPECT_EQ(log(positive).dtype(), kF32);
  EXPECT_EQ(pow(h, 2.0).dtype(), kF32);
  EXPECT_EQ(sum(h).dtype(), kF32);
  EXPECT_EQ(mean(h, {1}).dtype(), kF32);
  EXPECT_EQ(var(h).dtype(), kF32);
  EXPECT_EQ(cross_entropy(h, target).dtype(), kF32);
  EXPECT_EQ(nll_loss(h, target).dtype(), kF32);
  EXPECT_EQ(mse_loss(h, input({4, 5}, 12, low)).dtype(), kF32);
}

// Batch norm keeps the input's dtype (so a ResNet's saved activations halve) and computes in
// f32: its running statistics and its parameters' gradients stay f32, and its output equals
// the f32 computation on the same (low-precision) input, rounded once to the low dtype.
TEST_P(AutocastDtypes, BatchNormComputesInF32AndKeepsTheInputDtype) {
  const DType low = GetParam();
  const Variable img = param({4, 3, 5, 5}, 13, low);
  const Variable w = param({3}, 14), b = param({3}, 15);
  Tensor rm = zeros({3}), rv = ones({3});
  Variable y;
  {
    AutocastGuard autocast(low);
    y = batch_norm(img, w, b, rm, rv, true);
  }
  EXPECT_EQ(y.dtype(), low);
  EXPECT_EQ(rm.dtype(), kF32);
  Tensor rm32 = zeros({3}), rv32 = ones({3});
  const Variable img32 = Variable(img.data().to(kF32), true);
  const Variable y32 = batch_norm(img32, w, b, rm32, rv32, true);
  EXPECT_EQ(max_abs_diff(y.data().to(kF32), y32.data().to(low).to(kF32)), 0);
  EXPECT_LT(max_abs_diff(rm, rm32), 1e-6);
  EXPECT_LT(max_abs_diff(rv, rv32), 1e-6);
  sum(to(y, kF32)).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kF32);
  EXPECT_EQ(img.grad().dtype(), low);
}

// batch_norm_relu is batch_norm under autocast: the input's dtype kept, f32 statistics and
// parameter gradients. A residual of the input's dtype is fused; one of another dtype gives
// what the unfused relu(batch_norm(x) + residual) gives (add promotes: low + f32 is f32).
TEST_P(AutocastDtypes, BatchNormReluIsBatchNormAndItsResidualPromotes) {
  const DType low = GetParam();
  const Variable img = param({4, 3, 5, 5}, 30, low), same = param({4, 3, 5, 5}, 31, low);
  const Variable wide = param({4, 3, 5, 5}, 32);
  const Variable w = param({3}, 33), b = param({3}, 34);
  for (const Variable& residual : {Variable(), same, wide}) {
    Tensor rm = zeros({3}), rv = ones({3}), erm = zeros({3}), erv = ones({3});
    Variable fused, unfused;
    {
      AutocastGuard autocast(low);
      fused = batch_norm_relu(img, w, b, residual, rm, rv, true);
      const Variable bn = batch_norm(img, w, b, erm, erv, true);
      unfused = relu(residual.defined() ? add(bn, residual) : bn);
    }
    EXPECT_EQ(fused.dtype(), unfused.dtype());
    EXPECT_EQ(fused.dtype(), residual.defined() ? residual.dtype() : low);
    EXPECT_LT(max_abs_diff(fused.data().to(kF32), unfused.data().to(kF32)), 0.05);
    EXPECT_EQ(max_abs_diff(rm, erm), 0);
    EXPECT_EQ(max_abs_diff(rv, erv), 0);
    w.zero_grad();
    sum(to(fused, kF32)).backward();
    EXPECT_EQ(w.grad().dtype(), kF32);
    EXPECT_EQ(img.grad().dtype(), low);
    if (residual.defined()) {
      EXPECT_EQ(residual.grad().dtype(), residual.dtype());
    }
  }
}

TEST_P(AutocastDtypes, PromoteAndPassThrough) {
  const DType low = GetParam();
  const DType other = low == kF16 ? kBF16 : kF16;
  AutocastGuard autocast(low);
  const Variable a = input({3, 4}, 16, low), f = input({3, 4}, 17), o = input({3, 4}, 18, other);
  EXPECT_EQ(add(a, f).dtype(), kF32);
  EXPECT_EQ(sub(f, a).dtype(), kF32);
  EXPECT_EQ(mul(a, f).dtype(), kF32);
  EXPECT_EQ(div(a, f).dtype(), kF32);
  EXPECT_EQ(maximum(a, f).dtype(), kF32);
  EXPECT_EQ(minimum(a, f).dtype(), kF32);
  EXPECT_EQ(where(gt(a.data(), 0.0), a, f).dtype(), kF32);
  EXPECT_EQ(cat({a, f}, 0).dtype(), kF32);
  EXPECT_EQ(add(a, o).dtype(), kF32);  // f16 with bf16: f32
  EXPECT_EQ(add(a, a).dtype(), low);
  // Not in the table: the input's dtype.
  EXPECT_EQ(relu(a).dtype(), low);
  EXPECT_EQ(tanh(f).dtype(), kF32);
  EXPECT_EQ(reshape(a, {12}).dtype(), low);
}

TEST_P(AutocastDtypes, GradientsReachParametersInTheirDtype) {
  const DType low = GetParam();
  const Variable x = Variable(input({4, 6}, 19).data(), true);
  const Variable w = param({3, 6}, 20), b = param({3}, 21);
  Variable loss;
  {
    AutocastGuard autocast(low);
    const Variable out = linear(x, w, b);
    ASSERT_EQ(out.dtype(), low);
    loss = sum(square(out));
  }
  loss.backward();
  EXPECT_EQ(w.grad().dtype(), kF32);
  EXPECT_EQ(b.grad().dtype(), kF32);
  EXPECT_EQ(x.grad().dtype(), kF32);
  // The f32 network's gradient, to the low dtype's precision.
  const Variable w32 = Variable(w.data(), true), b32 = Variable(b.data(), true);
  sum(square(linear(x.detach(), w32, b32))).backward();
  const double tol = low == kF16 ? 2e-2 : 1e-1;
  EXPECT_TRUE(allclose(w.grad(), w32.grad(), tol, tol)) << max_abs_diff(w.grad(), w32.grad());
  EXPECT_TRUE(allclose(b.grad(), b32.grad(), tol, tol)) << max_abs_diff(b.grad(), b32.grad());
}

INSTANTIATE_TEST_SUITE_P(F16AndBF16, AutocastDtypes, ::testing::Values(kF16, kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Autocast, PolicyTable) {
  EXPECT_EQ(autocast_policy("linear"), CastPolicy::kLowerPrecision);
  EXPECT_EQ(autocast_policy("conv2d"), CastPolicy::kLowerPrecision);
  EXPECT_EQ(autocast_policy("softmax"), CastPolicy::kF32);
  EXPECT_EQ(autocast_policy("add"), CastPolicy::kPromote);
  EXPECT_EQ(autocast_policy("relu"), CastPolicy::kNone);
}

TEST(Autocast, CastCacheCastsAParameterOncePerForward) {
  const Variable x = input({4, 6}, 22), w = param({6, 6}, 23);
  Variable loss;
  {
    AutocastGuard autocast(kBF16);
    const Variable h1 = linear(x, w, Variable());
    const Variable h2 = linear(relu(h1), w, Variable());  // the same weight again
    EXPECT_EQ(autocast_cache_size(), 1u);
    // Both uses hang off one cast node, whose one edge leads to the weight's accumulator.
    const Edge e1 = h1.grad_fn()->next_edges()[1], e2 = h2.grad_fn()->next_edges()[1];
    ASSERT_TRUE(e1.valid());
    EXPECT_EQ(e1.node, e2.node);
    EXPECT_EQ(e1.node->name(), "ToDTypeBackward");
    EXPECT_EQ(e1.node->next_edges()[0].node, w.grad_accumulator());
    loss = sum(h2);
  }
  EXPECT_EQ(autocast_cache_size(), 0u);  // cleared by the outermost guard's exit
  loss.backward();
  EXPECT_EQ(w.grad().dtype(), kF32);

  // Activations (non-leaves) and inputs that need no gradient are not cached.
  AutocastGuard autocast(kF16);
  linear(x, Variable(w.data()), Variable());
  EXPECT_EQ(autocast_cache_size(), 0u);
  {
    NoGradGuard no_grad;  // a cast made without a graph must not be reused with one
    linear(x, w, Variable());
    EXPECT_EQ(autocast_cache_size(), 0u);
  }
}

TEST(Autocast, TwoForwardsAndBackwardsInsideOneGuard) {
  // The cached cast is shared by both graphs; each backward goes through it.
  const Variable x = input({4, 6}, 24), w = param({3, 6}, 25);
  AutocastGuard autocast(kBF16);
  sum(linear(x, w, Variable())).backward();
  const Tensor first = w.grad().clone();
  sum(linear(x, w, Variable())).backward();
  EXPECT_TRUE(allclose(w.grad(), mul(first, 2.0), 1e-6, 1e-6));
  EXPECT_EQ(autocast_cache_size(), 1u);
}

TEST(Autocast, NestingAndDisabledRegions) {
  const Variable x = input({2, 3}, 26), w = param({4, 3}, 27);
  EXPECT_FALSE(is_autocast_enabled(DeviceType::kCPU));
  {
    AutocastGuard outer(kBF16);
    EXPECT_EQ(linear(x, w, Variable()).dtype(), kBF16);
    {
      AutocastGuard off(kBF16, DeviceType::kCPU, /*enabled=*/false);
      EXPECT_FALSE(is_autocast_enabled(DeviceType::kCPU));
      EXPECT_EQ(linear(x, w, Variable()).dtype(), kF32);
      {
        AutocastGuard inner(kF16, DeviceType::kCPU);
        EXPECT_EQ(linear(x, w, Variable()).dtype(), kF16);
      }
      EXPECT_EQ(linear(x, w, Variable()).dtype(), kF32);
    }
    EXPECT_EQ(autocast_dtype(DeviceType::kCPU), kBF16);
    EXPECT_EQ(linear(x, w, Variable()).dtype(), kBF16);
    EXPECT_EQ(autocast_cache_size(), 2u);  // the weight in bf16 and in f16
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::kCPU));
  EXPECT_EQ(autocast_cache_size(), 0u);
  EXPECT_EQ(linear(x, w, Variable()).dtype(), kF32);
  {
    // A guard for another device type leaves CPU ops alone.
    AutocastGuard cuda_only(kF16, DeviceType::kCUDA);
    EXPECT_TRUE(is_autocast_enabled(DeviceType::kCUDA));
    EXPECT_EQ(linear(x, w, Variable()).dtype(), kF32);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::kCUDA));
  EXPECT_THROW(AutocastGuard bad(kF32), Error);
}

TEST(Autocast, GradcheckOfTheCast) {
  // f64 -> f32 -> f64: the cast's gradient is the identity, up to f32 rounding.
  GradcheckOptions loose;
  loose.eps = 1e-3;
  loose.atol = 1e-3;
  loose.rtol = 1e-3;
  const GradcheckResult res = gradcheck(
      [](const V& v) { return to(mul(to(v[0], kF32), to(v[1], kF32)), kF64); },
      {r({3, 4}, 28), r({3, 4}, 29)}, loose);
  EXPECT_TRUE(res.ok) << res.message;
  // Exact: the gradient arriving at the cast is cast back to the source dtype, unchanged.
  const Variable a = param({5}, 30);
  const Variable h = to(a, kBF16);
  EXPECT_EQ(h.grad_fn()->name(), "ToDTypeBackward");
  const Tensor g = from_vector<float>({1, -2, 0.5, 4, 8}, {5}).to(kBF16);
  h.backward(g);
  EXPECT_EQ(a.grad().dtype(), kF32);
  EXPECT_TRUE(allclose(a.grad(), g.to(kF32), 0, 0));
}

TEST(Autocast, CheckpointRecomputesWithTheFirstRunsSettings) {
  // The recompute runs during backward, after the guard exited: it must re-enter bf16.
  const Variable x = input({4, 6}, 36), w1 = param({5, 6}, 37), w2 = param({3, 5}, 38);
  const auto block = [&](const Variable& h) { return relu(linear(h, w1, Variable())); };
  const auto run = [&](bool use_checkpoint) {
    w1.zero_grad();
    w2.zero_grad();
    Variable loss;
    {
      AutocastGuard autocast(kBF16);
      const Variable h = use_checkpoint ? checkpoint(block, x) : block(x);
      EXPECT_EQ(h.dtype(), kBF16);
      loss = sum(linear(h, w2, Variable()));
    }
    loss.backward();
    return std::make_pair(w1.grad().clone(), w2.grad().clone());
  };
  const auto plain = run(false), checkpointed = run(true);
  EXPECT_TRUE(allclose(checkpointed.first, plain.first, 0, 0));
  EXPECT_TRUE(allclose(checkpointed.second, plain.second, 0, 0));
  const AutocastSettings off = autocast_settings();
  EXPECT_FALSE(off.per_device[0].first);
  {
    AutocastGuard f16(kF16, DeviceType::kCPU);
    const AutocastSettings captured = autocast_settings();
    AutocastGuard replay(captured);
    EXPECT_EQ(autocast_dtype(DeviceType::kCPU), kF16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::kCPU));
}

// A 2-layer MLP trained with plain SGD for a few steps, returning each step's loss.
std::vector<double> train_mlp(bool use_autocast, DType low) {
  Generator g(31);
  const Tensor x = randn({64, 16}, kF32, &g);
  // Labels from a fixed linear rule, so the loss can fall.
  const Tensor y = argmax(matmul(x, randn({16, 4}, kF32, &g)), 1);
  std::vector<Variable> params = {param({32, 16}, 32), param({32}, 33), param({4, 32}, 34),
                                  param({4}, 35)};
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    Variable loss;
    {
      AutocastGuard autocast(low, use_autocast);
      const Variable h = relu(linear(Variable(x), params[0], params[1]));
      const Variable logits = linear(h, params[2], params[3]);
      loss = cross_entropy(logits, y);
    }
    EXPECT_EQ(loss.dtype(), kF32);
    losses.push_back(loss.item());
    for (Variable& p : params) p.zero_grad();
    loss.backward();
    NoGradGuard no_grad;
    for (Variable& p : params) {
      EXPECT_EQ(p.grad().dtype(), kF32);
      Tensor data = p.data();
      add_(data, p.grad(), -0.5);
    }
  }
  return losses;
}

TEST(Autocast, MlpTrainingTracksF32) {
  const std::vector<double> f32 = train_mlp(false, kBF16);
  EXPECT_LT(f32.back(), 0.5 * f32.front());
  // Stated tolerances on every step's loss: bf16 has 8 significant bits, f16 11.
  for (const auto& [low, tol] : {std::pair<DType, double>{kBF16, 0.03}, {kF16, 0.005}}) {
    const std::vector<double> amp = train_mlp(true, low);
    double worst = 0;
    for (size_t i = 0; i < f32.size(); ++i) worst = std::max(worst, std::abs(amp[i] - f32[i]));
    EXPECT_LT(worst, tol) << dtype_name(low) << ": largest loss difference " << worst;
    std::printf("%s autocast: loss %.4f -> %.4f (f32 %.4f -> %.4f), max |diff| %.5f\n",
                dtype_name(low), amp.front(), amp.back(), f32.front(), f32.back(), worst);
  }
}

}  // namespace
}  // namespace tessera
