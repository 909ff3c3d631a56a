// The f32 convolution paths of issue 15 (tensor/cpu/conv_path.h): oneDNN for 1x1 layers with 128+
// channels, for 3x3 layers with 128+ channels on small maps or at stride 2 and for larger kernels,
// oneDNN's Winograd F(4x4, 3x3) for 3x3 layers of 32-256 channels at stride 1 (where allowed,
// tensor/accelerator.h), and tessera's own kernels elsewhere. Each pass is checked against the f64
// im2col reference (which the autograd gradcheck covers) and by finite differences in f32, on small
// odd shapes with strides, padding and a batch of 1. The same file runs five times (BUILD): with
// the shape rule, and with TESSERA_CONV=onednn / =own forcing one side for every f32 convolution; a
// fourth run takes tessera's side with OpenBLAS's GEMM (TESSERA_CONV_GEMM=openblas) instead of
// oneDNN's sgemm, which CPUs with AVX-512 use; a fifth turns Winograd off by default
// (TESSERA_CONV_WINOGRAD=off). Also: results that must not depend on the thread count at a batch of
// 8 or less (the direct weight gradient and batch norm's sums now split channels there), and max
// pooling's choice among equal values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "tensor/accelerator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

struct Case {
  const char* name;
  Shape x, w;
  int64_t stride, pad;
};

// Small versions of every kind of ResNet-18/50 layer, odd sizes, batch 1 among them.
std::vector<Case> cases() {
  return {
      {"1x1 128->8", {2, 128, 5, 7}, {8, 128, 1, 1}, 1, 0},
      {"1x1 16->128 batch 1", {1, 16, 7, 5}, {128, 16, 1, 1}, 1, 0},
      {"1x1/2 130->12", {3, 130, 9, 7}, {12, 130, 1, 1}, 2, 0},
      {"3x3 128->128 5x5", {2, 128, 5, 5}, {128, 128, 3, 3}, 1, 1},
      {"3x3/2 128->136 9x7", {1, 128, 9, 7}, {136, 128, 3, 3}, 2, 1},
      {"3x3 16->24 11x9", {3, 16, 11, 9}, {24, 16, 3, 3}, 1, 1},
      {"7x7/2 stem 3->8 15x13", {2, 3, 15, 13}, {8, 3, 7, 7}, 2, 3},
      {"5x5 4->6 no padding", {1, 4, 9, 8}, {6, 4, 5, 5}, 1, 0},
      // Past 1024 output columns in one task: the products run in column pieces (conv.cc).
      {"1x1 8->16 41x67 batch 1", {1, 8, 41, 67}, {16, 8, 1, 1}, 1, 0},
      {"5x5/2 3->8 95x90 batch 1", {1, 3, 95, 90}, {8, 3, 5, 5}, 2, 2},
      // Winograd's F(4x4, 3x3) where allowed (tensor/accelerator.h): 4x4 output tiles, the
      // last ones partial, with and without padding.
      {"3x3 32->48 9x10 (Winograd)", {2, 32, 9, 10}, {48, 32, 3, 3}, 1, 1},
      {"3x3 64->64 12x11 no padding batch 1 (Winograd)", {1, 64, 12, 11}, {64, 64, 3, 3}, 1, 0},
  };
}

// True for the cases Winograd's rule takes (conv_path.h): 3x3 at stride 1, padding at most 1,
// channels multiples of 16 from 32 to 256, outputs of 8x8 or more.
bool winograd_shape(const Case& c) {
  const int64_t oh = c.x[2] + 2 * c.pad - 2, ow = c.x[3] + 2 * c.pad - 2;
  const int64_t in = c.x[1], out = c.w[0];
  return c.w[2] == 3 && c.w[3] == 3 && c.stride == 1 && c.pad <= 1 && in % 16 == 0 &&
         out % 16 == 0 && std::min(in, out) >= 32 && std::max(in, out) <= 256 && oh >= 8 &&
         ow >= 8;
}

Conv2dParams params(const Case& c) {
  Conv2dParams p;
  p.stride = {c.stride, c.stride};
  p.padding = {c.pad, c.pad};
  return p;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double scale = 1e-6, diff = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    diff = std::max(diff, std::abs(x[i] - y[i]));
  }
  return diff / scale;
}

TEST(ConvPaths, F32PassesMatchTheF64Reference) {
  manual_seed(3);
  for (const Case& c : cases()) {
    const Conv2dParams p = params(c);
    const Tensor x = randn(c.x, kF64), w = randn(c.w, kF64);
    const Tensor y = conv2d(x, w, Tensor(), p);
    const Tensor g = randn(y.shape(), kF64);
    const Tensor y32 = conv2d(x.to(kF32), w.to(kF32), Tensor(), p);
    EXPECT_LT(max_rel_diff(y32, y), 1e-5) << c.name;
    const Tensor dx32 = conv2d_backward_input(g.to(kF32), w.to(kF32), c.x, p);
    EXPECT_LT(max_rel_diff(dx32, conv2d_backward_input(g, w, c.x, p)), 1e-5) << c.name;
    const Tensor dw32 = conv2d_backward_weight(g.to(kF32), x.to(kF32), c.w, p);
    EXPECT_LT(max_rel_diff(dw32, conv2d_backward_weight(g, x, c.w, p)), 1e-5) << c.name;
  }
}

// Winograd runs exactly where its rule says: every pass of those shapes gives other bits with it
// allowed than without it (both held to f64 above), and every other shape the same bits. Not
// where TESSERA_CONV=own forces tessera's kernels, nor on CPUs where oneDNN lacks it (no
// AVX-512), where every shape gives the same bits.
TEST(ConvPaths, WinogradRunsWhereItsRuleSays) {
  // The environment's setting is the default; the tests below set it either way.
  const char* setting = std::getenv("TESSERA_CONV_WINOGRAD");
  const bool allowed = allow_winograd();
  EXPECT_EQ(allowed, setting == nullptr || std::string(setting) != "off");
  const char* forced = std::getenv("TESSERA_CONV");
  const bool own = forced != nullptr && std::string(forced) == "own";
  const bool available = winograd_available(Device::cpu()) && !own;
  std::printf("Winograd expected where its rule says: %s\n", available ? "yes" : "no");
  manual_seed(9);
  std::vector<Case> all = cases();
  all.push_back({"3x3 16->16 (too few channels)", {2, 16, 9, 9}, {16, 16, 3, 3}, 1, 1});
  all.push_back({"3x3 272->32 (too many)", {1, 272, 8, 8}, {32, 272, 3, 3}, 1, 1});
  all.push_back({"3x3 32->32 on 7x7 (too small)", {1, 32, 7, 7}, {32, 32, 3, 3}, 1, 1});
  all.push_back({"3x3 36->32 (not whole blocks)", {1, 36, 9, 9}, {32, 36, 3, 3}, 1, 1});
  for (const Case& c : all) {
    const Conv2dParams p = params(c);
    const Tensor x = randn(c.x), w = randn(c.w);
    const Tensor g = randn(conv2d(x, w, Tensor(), p).shape());
    auto passes = [&](bool allow) {
      set_allow_winograd(allow);
      const std::vector<Tensor> out = {conv2d(x, w, Tensor(), p),
                                       conv2d_backward_input(g, w, c.x, p),
                                       conv2d_backward_weight(g, x, c.w, p)};
      set_allow_winograd(allowed);  // the later tests run with the environment's setting
      return out;
    };
    const std::vector<Tensor> with = passes(true), without = passes(false);
    const bool expected = available && winograd_shape(c);
    for (size_t k = 0; k < with.size(); ++k) {
      const bool same = with[k].to_vector<float>() == without[k].to_vector<float>();
      EXPECT_EQ(same, !expected) << c.name << ", pass " << k;
    }
  }
}

// L(x, w) = <g, conv(x, w)>: central differences of L in f32 against the f32 gradients at a
// few elements of x and of w. L is linear in each, so the difference quotient is exact but for
// rounding; a wrong index or a missed tap shows as an O(1) error.
TEST(ConvPaths, F32GradientsMatchFiniteDifferences) {
  manual_seed(4);
  for (const Case& c : cases()) {
    const Conv2dParams p = params(c);
    Tensor x = randn(c.x), w = randn(c.w);
    const Tensor g = randn(conv2d(x, w, Tensor(), p).shape());
    const Tensor dx = conv2d_backward_input(g, w, c.x, p).contiguous();
    const Tensor dw = conv2d_backward_weight(g, x, c.w, p).contiguous();
    auto loss = [&] { return sum(conv2d(x, w, Tensor(), p).to(kF64) * g.to(kF64)).item(); };
    const float eps = 0.25f;
    for (Tensor* t : {&x, &w}) {
      const Tensor& grad = t == &x ? dx : dw;
      float* data = t->data<float>();
      for (int64_t i = 0; i < t->numel(); i += std::max<int64_t>(1, t->numel() / 7)) {
        const float keep = data[i];
        data[i] = keep + eps;
        const double up = loss();
        data[i] = keep - eps;
        const double down = loss();
        data[i] = keep;
        const double fd = (up - down) / (2 * eps);
        const double analytic = grad.data<float>()[i];
        EXPECT_NEAR(fd, analytic, 2e-3 * (1 + std::abs(analytic)))
            << c.name << (t == &x ? " dx[" : " dw[") << i << "]";
      }
    }
  }
}

// Same inputs, same thread count: the same bits, whichever path runs (DESIGN.md: same seed,
// same world size, bitwise-identical runs).
TEST(ConvPaths, RepeatedRunsGiveTheSameBits) {
  manual_seed(7);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : cases()) {
      const Conv2dParams p = params(c);
      const Tensor x = randn(c.x), w = randn(c.w);
      const Tensor g = randn(conv2d(x, w, Tensor(), p).shape());
      auto all = [&] {
        std::vector<float> v = conv2d(x, w, Tensor(), p).to_vector<float>();
        for (const Tensor& t : {conv2d_backward_input(g, w, c.x, p),
                                conv2d_backward_weight(g, x, c.w, p)}) {
          const std::vector<float> more = t.to_vector<float>();
          v.insert(v.end(), more.begin(), more.end());
        }
        return v;
      };
      const std::vector<float> first = all();
      EXPECT_EQ(first, all()) << c.name << ", " << threads << " threads";
    }
  }
  set_num_threads(1);
}

// conv2d_backward computes both passes in one call (the autograd node's path when weight
// gradients are not deferred), preparing the output gradient once: oneDNN reorders it once for
// both primitives, f16 widens it once. Its results must be each pass's alone, bit for bit, in
// every dtype and whichever pass is asked for.
TEST(ConvPaths, BothPassesInOneCallGiveEachPassAloneBitForBit) {
  manual_seed(8);
  for (DType type : {kF32, kF64, kF16, kBF16}) {
    for (const Case& c : cases()) {
      const Conv2dParams p = params(c);
      const Tensor x = randn(c.x).to(type), w = randn(c.w).to(type);
      const Tensor g = randn(conv2d(x, w, Tensor(), p).shape()).to(type);
      const std::string what = std::string(c.name) + ", " + dtype_name(type);
      const Tensor dx = conv2d_backward_input(g, w, c.x, p);
      const Tensor dw = conv2d_backward_weight(g, x, c.w, p);
      const auto [both_dx, both_dw] = conv2d_backward(g, x, w, c.x, p, true, true);
      ASSERT_EQ(both_dx.dtype(), type) << what;
      ASSERT_EQ(both_dw.dtype(), type) << what;
      EXPECT_EQ(both_dx.to_vector<double>(), dx.to_vector<double>()) << what;
      EXPECT_EQ(both_dw.to_vector<double>(), dw.to_vector<double>()) << what;
      const auto [only_dx, no_dw] = conv2d_backward(g, Tensor(), w, c.x, p, true, false);
      EXPECT_EQ(only_dx.to_vector<double>(), dx.to_vector<double>()) << what;
      EXPECT_FALSE(no_dw.defined()) << what;
      const auto [no_dx, only_dw] = conv2d_backward(g, x, w, c.x, p, false, true);
      EXPECT_FALSE(no_dx.defined()) << what;
      EXPECT_EQ(only_dw.to_vector<double>(), dw.to_vector<double>()) << what;
    }
  }
}

TEST(ConvPaths, BothPassesNeedTheInputForTheWeightGradient) {
  const Case c = cases()[0];
  const Tensor w = randn(c.w), g = randn(conv2d(randn(c.x), w, Tensor(), params(c)).shape());
  try {
    conv2d_backward(g, Tensor(), w, c.x, params(c), true, true);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the weight gradient needs the input, of shape"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConvPaths, SmallBatchWeightGradientDoesNotDependOnTheThreadCount) {
  manual_seed(5);
  for (int64_t n : {1, 3, 8, 11}) {
    Conv2dParams p;
    p.padding = {1, 1};
    for (int64_t stride : {1, 2}) {
      p.stride = {stride, stride};
      const Tensor x = randn({n, 24, 9, 11}), w = randn({40, 24, 3, 3});
      const Tensor g = randn(conv2d(x, w, Tensor(), p).shape());
      set_num_threads(1);
      const std::vector<float> one =
          conv2d_backward_weight(g, x, w.shape(), p).to_vector<float>();
      set_num_threads(2);
      const std::vector<float> two =
          conv2d_backward_weight(g, x, w.shape(), p).to_vector<float>();
      EXPECT_EQ(one, two) << "batch " << n << " stride " << stride;
    }
  }
  set_num_threads(1);
}

// im2col + GEMM at batch 1: one task, whose products are cut into column pieces that run on
// both threads. Every pass must give the one-thread bits. (oneDNN's convolution primitives,
// which by default take kernels larger than 3x3, choose their own threading: the 5x5 case runs
// where TESSERA_CONV=own keeps it on tessera's side.)
TEST(ConvPaths, SingleTaskProductsDoNotDependOnTheThreadCount) {
  const char* forced = std::getenv("TESSERA_CONV");
  const std::string side = forced == nullptr ? "" : forced;
  if (side == "onednn") GTEST_SKIP() << "every convolution runs on oneDNN's primitives";
  manual_seed(8);
  for (const Case& c : cases()) {
    if (std::string(c.name).find("batch 1") == std::string::npos || c.x[2] * c.x[3] < 1024) {
      continue;
    }
    if (c.w[2] > 3 && side != "own") continue;
    const Conv2dParams p = params(c);
    const Tensor x = randn(c.x), w = randn(c.w);
    const Tensor g = randn(conv2d(x, w, Tensor(), p).shape());
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      std::vector<float> all = conv2d(x, w, Tensor(), p).to_vector<float>();
      for (const Tensor& t : {conv2d_backward_input(g, w, c.x, p),
                              conv2d_backward_weight(g, x, c.w, p)}) {
        const std::vector<float> v = t.to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
      }
      runs.push_back(all);
    }
    EXPECT_EQ(runs[0], runs[1]) << c.name;
  }
  set_num_threads(1);
}

TEST(ConvPaths, SmallBatchBatchNormDoesNotDependOnTheThreadCount) {
  manual_seed(6);
  for (int64_t n : {1, 8}) {
    const Tensor x = randn({n, 21, 7, 5}), g = randn({n, 21, 7, 5});
    const Tensor w = randn({21}), b = randn({21});
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const Tensor rm = zeros({21}), rv = ones({21});
      const BatchNormResult r = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
      const BatchNormGrads d = batch_norm_backward(g, x, w, r.mean, r.invstd, true, true, true);
      std::vector<float> all = r.output.to_vector<float>();
      for (const Tensor& t : {d.input, d.weight, d.bias, rm, rv}) {
        const std::vector<float> v = t.to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
      }
      runs.push_back(all);
    }
    EXPECT_EQ(runs[0], runs[1]) << "batch " << n;
  }
  set_num_threads(1);
}

// Equal values (ReLU's zeros before the stem's pool): the first in row-major order wins, and a
// NaN wins over numbers (the first NaN if several), as in PyTorch.
TEST(ConvPaths, MaxPoolTiesAndNaNs) {
  Pool2dParams p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.padding = {1, 1};
  const Tensor zeros_in = zeros({1, 1, 4, 4});
  const auto [y0, i0] = max_pool2d_with_indices(zeros_in, p);
  EXPECT_EQ(i0.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(y0.to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  std::vector<float> v(16, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  v[5] = nan;   // in all four windows
  v[15] = nan;  // only in the last, after v[5]
  v[10] = 7.0f;
  const auto [y1, i1] = max_pool2d_with_indices(from_vector<float>(v, {1, 1, 4, 4}), p);
  EXPECT_EQ(i1.to_vector<int64_t>(), (std::vector<int64_t>{5, 5, 5, 5}));
  EXPECT_TRUE(std::isnan(y1.to_vector<float>()[3]));
}

}  // namespace
}  // namespace tessera
