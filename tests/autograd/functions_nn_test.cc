// Gradcheck for the neural-network ops and losses; loss values against formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "tests/autograd/gradcheck_util.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

TEST(Gradcheck, Conv2d) {
  Conv2dParams plain;
  plain.padding = {1, 1};
  Conv2dParams strided;
  strided.stride = {2, 2};
  strided.dilation = {1, 2};
  strided.padding = {1, 2};
  Conv2dParams grouped;
  grouped.groups = 2;
  for (const Conv2dParams& p : {plain, strided, grouped}) {
    const int64_t cin = 4, cout = 4;
    EXPECT_GRADCHECK([p](const V& v) { return conv2d(v[0], v[1], v[2], p); },
                     std::vector<Tensor>{r({2, cin, 5, 6}, 1), r({cout, cin / p.groups, 3, 3}, 2),
                                         r({cout}, 3)});
  }
  EXPECT_GRADCHECK([](const V& v) { return conv2d(v[0], v[1], Variable(), {}); },
                   std::vector<Tensor>{r({1, 2, 4, 4}, 4).transpose(2, 3), r({3, 2, 1, 1}, 5)});
}

TEST(Gradcheck, Pooling) {
  Pool2dParams p;
  p.kernel = {2, 3};
  p.stride = {2, 1};
  p.padding = {1, 1};
  // Distinct values so the max is never tied.
  const Tensor distinct = add(mul(arange(0, 60, 1, kF64).view({1, 2, 5, 6}), 0.1),
                              mul(r({1, 2, 5, 6}, 6), 1e-3));
  EXPECT_GRADCHECK([p](const V& v) { return max_pool2d(v[0], p); }, std::vector<Tensor>{distinct});
  EXPECT_GRADCHECK([p](const V& v) { return avg_pool2d(v[0], p); },
                   std::vector<Tensor>{r({2, 2, 5, 6}, 7)});
  Pool2dParams excl = p;
  excl.count_include_pad = false;
  EXPECT_GRADCHECK([excl](const V& v) { return avg_pool2d(v[0], excl); },
                   std::vector<Tensor>{r({2, 2, 5, 6}, 8)});
  EXPECT_GRADCHECK([](const V& v) { return adaptive_avg_pool2d(v[0], {2, 4}); },
                   std::vector<Tensor>{r({2, 3, 5, 7}, 9)});
  EXPECT_GRADCHECK([](const V& v) { return adaptive_avg_pool2d(v[0], {1, 1}); },
                   std::vector<Tensor>{r({2, 3, 4, 4}, 10)});
}

TEST(Gradcheck, Softmax) {
  const std::vector<Tensor> in = {r({3, 5}, 11)};
  EXPECT_GRADCHECK([](const V& v) { return softmax(v[0], 1); }, in);
  EXPECT_GRADCHECK([](const V& v) { return softmax(v[0], 0); }, in);
  EXPECT_GRADCHECK([](const V& v) { return log_softmax(v[0], -1); }, in);
  EXPECT_GRADCHECK([](const V& v) { return log_softmax(v[0], 0); }, in);
}

TEST(Gradcheck, BatchNormTrainingAndEval) {
  const Tensor rm = zeros({3}, kF64), rv = ones({3}, kF64);
  // Training: gradients through the batch statistics (running stats are only updated).
  EXPECT_GRADCHECK(
      [rm, rv](const V& v) {
        return batch_norm(v[0], v[1], v[2], rm.clone(), rv.clone(), true, 0.1, 1e-5);
      },
      std::vector<Tensor>{r({4, 3, 2, 2}, 12), r({3}, 13), r({3}, 14)});
  EXPECT_GRADCHECK(
      [rm, rv](const V& v) {
        return batch_norm(v[0], Variable(), Variable(), rm.clone(), rv.clone(), true, 0.1, 1e-5);
      },
      std::vector<Tensor>{r({5, 3}, 15)});
  const Tensor erm = r({3}, 16), erv = add(abs(r({3}, 17)), 0.5);
  EXPECT_GRADCHECK(
      [erm, erv](const V& v) { return batch_norm(v[0], v[1], v[2], erm, erv, false, 0.1, 1e-5); },
      std::vector<Tensor>{r({4, 3, 2, 2}, 18), r({3}, 19), r({3}, 20)});
}

// The fused batch norm + ReLU (+ residual): gradients of the input (through the batch
// statistics), weight, bias and residual; without residual or affine parameters; in eval; on a
// non-contiguous input. (ReLU's kink at 0: random inputs put no output within eps of it.)
TEST(Gradcheck, BatchNormReluTrainingAndEval) {
  const Tensor rm = zeros({3}, kF64), rv = ones({3}, kF64);
  EXPECT_GRADCHECK(
      [rm, rv](const V& v) {
        return batch_norm_relu(v[0], v[1], v[2], v[3], rm.clone(), rv.clone(), true, 0.1, 1e-5);
      },
      std::vector<Tensor>{r({4, 3, 2, 3}, 40), r({3}, 41), r({3}, 42), r({4, 3, 2, 3}, 43)});
  EXPECT_GRADCHECK(
      [rm, rv](const V& v) {
        return batch_norm_relu(v[0], v[1], v[2], Variable(), rm.clone(), rv.clone(), true, 0.1,
                               1e-5);
      },
      std::vector<Tensor>{r({1, 3, 5, 3}, 44).transpose(2, 3), r({3}, 45), r({3}, 46)});
  EXPECT_GRADCHECK(
      [rm, rv](const V& v) {
        return batch_norm_relu(v[0], Variable(), Variable(), v[1], rm.clone(), rv.clone(), true,
                               0.1, 1e-5);
      },
      std::vector<Tensor>{r({5, 3}, 47), r({5, 3}, 48)});
  const Tensor erm = r({3}, 49), erv = add(abs(r({3}, 50)), 0.5);
  EXPECT_GRADCHECK(
      [erm, erv](const V& v) {
        return batch_norm_relu(v[0], v[1], v[2], v[3], erm, erv, false, 0.1, 1e-5);
      },
      std::vector<Tensor>{r({2, 3, 3, 1}, 51), r({3}, 52), r({3}, 53), r({2, 3, 3, 1}, 54)});
}

// The same ops on channels-last inputs (tensor.h's MemoryFormat), which run the NHWC kernels:
// batch norm (+ ReLU, + residual), training and eval, and max pooling, differentiated through
// the layout change (whose gradient passes through in the layout it arrives in).
TEST(Gradcheck, ChannelsLastBatchNormAndMaxPool) {
  const MemoryFormat cl = MemoryFormat::kChannelsLast;
  const Tensor rm = zeros({5}, kF64), rv = ones({5}, kF64);
  const auto nhwc = [cl](const Variable& v) {
    const Variable out = contiguous(v, cl);
    EXPECT_TRUE(out.data().is_channels_last() && !out.data().is_contiguous());
    return out;
  };
  const auto expect_nhwc = [](const Variable& y) {
    EXPECT_TRUE(y.data().is_channels_last() && !y.data().is_contiguous()) << shape_str(y.shape());
    return y;
  };
  EXPECT_GRADCHECK(
      [&](const V& v) {
        return expect_nhwc(batch_norm(nhwc(v[0]), v[1], v[2], rm.clone(), rv.clone(), true));
      },
      std::vector<Tensor>{r({3, 5, 3, 4}, 60), r({5}, 61), r({5}, 62)});
  EXPECT_GRADCHECK(
      [&](const V& v) {
        return expect_nhwc(batch_norm_relu(nhwc(v[0]), v[1], v[2], nhwc(v[3]), rm.clone(),
                                           rv.clone(), true));
      },
      std::vector<Tensor>{r({3, 5, 3, 4}, 63), r({5}, 64), r({5}, 65), r({3, 5, 3, 4}, 66)});
  const Tensor erm = r({5}, 67), erv = add(abs(r({5}, 68)), 0.5);
  EXPECT_GRADCHECK(
      [&](const V& v) {
        return expect_nhwc(batch_norm_relu(nhwc(v[0]), v[1], v[2], Variable(), erm, erv, false));
      },
      std::vector<Tensor>{r({2, 5, 3, 2}, 69), r({5}, 70), r({5}, 71)});
  Pool2dParams p;
  p.kernel = {3, 2};
  p.stride = {2, 1};
  p.padding = {1, 1};
  const Tensor distinct = add(mul(arange(0, 120, 1, kF64).view({2, 2, 5, 6}), 0.1),
                              mul(r({2, 2, 5, 6}, 72), 1e-3));
  EXPECT_GRADCHECK([&](const V& v) { return expect_nhwc(max_pool2d(nhwc(v[0]), p)); },
                   std::vector<Tensor>{distinct});
}

// In a residual block the residual is often the block's input, which also feeds the
// convolutions: its gradient is the sum over both paths, as with the unfused ops.
TEST(BatchNormRelu, GradientsEqualTheUnfusedOpsWhenTheResidualIsReused) {
  for (DType dt : {kF32, kBF16}) {
    const Variable x(randn({2, 3, 4, 5}, dt), true);
    const Variable w(add(randn({3}), 1.0), true), b(randn({3}), true);
    const Variable scale(randn({3, 1, 1}, dt), true);
    std::vector<Tensor> grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      for (const Variable& v : {x, w, b, scale}) v.zero_grad();
      Tensor rm = zeros({3}), rv = ones({3});
      const Variable h = mul(x, scale);  // stands in for the block's convolutions
      const Variable y =
          fused ? batch_norm_relu(h, w, b, x, rm, rv, true)
                : relu(add(batch_norm(h, w, b, rm, rv, true), x));
      sum(to(mul(y, y), kF32)).backward();
      for (const Variable& v : {x, w, b, scale}) grads[fused].push_back(v.grad().to(kF64));
    }
    for (size_t i = 0; i < grads[0].size(); ++i) {
      EXPECT_LT(max_abs_diff(grads[0][i], grads[1][i]), dt == kF32 ? 1e-5 : 0.1)
          << dt << " gradient " << i;
    }
  }
}

TEST(Gradcheck, Losses) {
  const Tensor target = from_vector<int64_t>({2, 0, 1, 2}, {4});
  const std::vector<Tensor> logits = {r({4, 3}, 21)};
  for (Reduction red : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    EXPECT_GRADCHECK([&](const V& v) { return cross_entropy(v[0], target, red); }, logits);
    EXPECT_GRADCHECK([&](const V& v) { return cross_entropy(v[0], target, red, 0.1); }, logits);
    EXPECT_GRADCHECK([&](const V& v) { return nll_loss(log_softmax(v[0], 1), target, red); },
                     logits);
  }
  EXPECT_GRADCHECK([](const V& v) { return mse_loss(v[0], v[1]); },
                   std::vector<Tensor>{r({3, 2}, 22), r({3, 2}, 23)});
}

TEST(Gradcheck, Dropout) {
  // A generator created inside fn draws the same mask on every evaluation.
  EXPECT_GRADCHECK(
      [](const V& v) {
        Generator g(4);
        return dropout(v[0], 0.4, true, &g);
      },
      std::vector<Tensor>{r({3, 4}, 24)});
}

TEST(Losses, CrossEntropyValueMatchesFormula) {
  const Tensor x = from_vector<double>({1, 2, 3, 0, 0, 0}, {2, 3});
  const Tensor y = from_vector<int64_t>({2, 1}, {2});
  const double lse0 = std::log(std::exp(1) + std::exp(2) + std::exp(3));
  const double want = ((lse0 - 3) + std::log(3.0)) / 2;
  EXPECT_NEAR(cross_entropy(Variable(x), y).item(), want, 1e-12);
  // Smoothing 0.3 over 3 classes: (1 - 0.3) NLL + 0.3 mean_c(-log p_c).
  const double smooth0 = 0.7 * (lse0 - 3) + 0.3 * (lse0 - 2);
  const double smooth1 = 0.7 * std::log(3.0) + 0.3 * std::log(3.0);
  EXPECT_NEAR(cross_entropy(Variable(x), y, Reduction::kMean, 0.3).item(),
              (smooth0 + smooth1) / 2, 1e-12);
  EXPECT_NEAR(mse_loss(Variable(x), Variable(zeros({2, 3}, kF64))).item(), 14.0 / 6, 1e-12);
}

TEST(Losses, BadTargetsAreClearErrors) {
  const Variable x(zeros({2, 3}));
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0, 3}, {2})), Error);
  EXPECT_THROW(cross_entropy(x, from_vector<int64_t>({0}, {1})), Error);
  EXPECT_THROW(cross_entropy(x, from_vector<float>({0, 1}, {2})), Error);
}

TEST(Dropout, SeededMaskScalesSurvivorsAndPassesThroughInEval) {
  Variable x(ones({1000}, kF64), true);
  Generator g(3);
  Variable y = dropout(x, 0.25, true, &g);
  const std::vector<double> v = y.data().to_vector<double>();
  int kept = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0 || std::fabs(e - 1 / 0.75) < 1e-12);
    kept += e != 0;
  }
  EXPECT_NEAR(kept / 1000.0, 0.75, 0.05);
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), v);  // gradient = mask
  Generator g2(3);
  EXPECT_EQ(dropout(x, 0.25, true, &g2).data().to_vector<double>(), v);  // same seed, same mask
  EXPECT_TRUE(dropout(x, 0.25, false).is_same(x));
}

}  // namespace
}  // namespace tessera
