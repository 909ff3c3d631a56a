// Convolution, pooling, softmax and batch norm against direct loops and formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

// Direct convolution, the definition written out.
Tensor naive_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t o = w.size(0), cg = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t oh = window_output_size(h, kh, p.stride[0], p.padding[0], p.dilation[0]);
  const int64_t ow = window_output_size(wd, kw, p.stride[1], p.padding[1], p.dilation[1]);
  const int64_t og = o / p.groups;
  std::vector<double> xs = x.to_vector<double>(), ws = w.to_vector<double>();
  std::vector<double> out(n * o * oh * ow);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double s = bias.defined() ? bias.at({oc}) : 0.0;
          const int64_t g = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = y * p.stride[0] - p.padding[0] + i * p.dilation[0];
                const int64_t ix = z * p.stride[1] - p.padding[1] + j * p.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += xs[((b * c + g * cg + ic) * h + iy) * wd + ix] *
                     ws[((oc * cg + ic) * kh + i) * kw + j];
              }
          out[((b * o + oc) * oh + y) * ow + z] = s;
        }
  return from_vector<double>(out, {n, o, oh, ow});
}

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
};

std::vector<ConvCase> conv_cases() {
  Conv2dParams strided;
  strided.stride = {2, 1};
  strided.padding = {1, 2};
  Conv2dParams dilated;
  dilated.dilation = {2, 2};
  dilated.padding = {2, 1};
  Conv2dParams grouped;
  grouped.groups = 2;
  grouped.padding = {1, 1};
  return {{{2, 3, 7, 6}, {4, 3, 3, 3}, Conv2dParams{}},
          {{2, 3, 7, 6}, {5, 3, 3, 2}, strided},
          {{1, 2, 9, 8}, {3, 2, 3, 3}, dilated},
          {{3, 4, 5, 5}, {6, 2, 3, 3}, grouped}};
}

TEST(Conv2d, ForwardMatchesDirectConvolution) {
  for (const ConvCase& c : conv_cases()) {
    Tensor x = randn(c.x, kF64), w = randn(c.w, kF64), b = randn({c.w[0]}, kF64);
    EXPECT_LT(max_abs_diff(conv2d(x, w, b, c.p), naive_conv(x, w, b, c.p)), 1e-10);
    Tensor y32 = conv2d(x.to(kF32), w.to(kF32), Tensor(), c.p);
    EXPECT_LT(max_abs_diff(y32, naive_conv(x, w, Tensor(), c.p)), 1e-4);
  }
}

// The direct 3x3 kernels (f32, stride 1, padding 1; forward with output channels a multiple of
// 8) with and without bias, as the input gradient (flipped weights), and the weight gradient:
// whole and partial blocks of 16 output channels, odd input channel counts, row widths that
// end in steps of 4, 2 and 1 positions, and maps whose size is not a multiple of 16. (On a
// machine without AVX-512 the same calls run im2col + GEMM, and test that instead.)
TEST(Conv2d, Direct3x3KernelMatchesTheDefinition) {
  Conv2dParams p;
  p.padding = {1, 1};
  struct Shape4 {
    int64_t n, c, k, h, w;
  };
  for (const Shape4& s : {Shape4{2, 3, 8, 5, 5}, Shape4{1, 5, 16, 7, 7}, Shape4{2, 4, 32, 6, 14},
                          Shape4{1, 2, 24, 4, 17}, Shape4{2, 3, 8, 3, 28}, Shape4{1, 2, 16, 3, 40},
                          Shape4{2, 3, 8, 2, 10}, Shape4{1, 4, 16, 5, 14},
                          Shape4{10, 3, 16, 4, 6}}) {
    const Tensor x = randn({s.n, s.c, s.h, s.w}, kF64), w = randn({s.k, s.c, 3, 3}, kF64);
    const Tensor b = randn({s.k}, kF64);
    const Tensor y = conv2d(x.to(kF32), w.to(kF32), b.to(kF32), p);
    EXPECT_LT(max_abs_diff(y, naive_conv(x, w, b, p)), 1e-4) << s.k << "x" << s.w;
    const Tensor y0 = conv2d(x.to(kF32), w.to(kF32), Tensor(), p);
    EXPECT_LT(max_abs_diff(y0, naive_conv(x, w, Tensor(), p)), 1e-4) << s.k << "x" << s.w;
    // The input gradient of a k -> m convolution is a direct m -> k one (k % 8 == 0).
    const int64_t m = s.c + 1;
    const Tensor g = randn({s.n, m, s.h, s.w}, kF64), wt = randn({m, s.k, 3, 3}, kF64);
    const Tensor dx = conv2d_backward_input(g.to(kF32), wt.to(kF32), {s.n, s.k, s.h, s.w}, p);
    const Tensor dx64 = conv2d_backward_input(g, wt, {s.n, s.k, s.h, s.w}, p);
    EXPECT_LT(max_abs_diff(dx, dx64), 1e-4) << s.k << "x" << s.w;
    // The weight gradient (direct for any channel counts), against f64.
    const Tensor gy = randn({s.n, s.k, s.h, s.w}, kF64);
    const Tensor dw = conv2d_backward_weight(gy.to(kF32), x.to(kF32), w.shape(), p);
    EXPECT_LT(max_abs_diff(dw, conv2d_backward_weight(gy, x, w.shape(), p)), 1e-3)
        << s.k << "x" << s.w;
    // Partial channel blocks (6 and 3 of 16 lanes).
    for (int64_t kk : {int64_t{6}, int64_t{3}}) {
      const Tensor part = gy.narrow(1, 0, std::min(kk, s.k)).contiguous();
      const Tensor g_kk = kk <= s.k ? part : randn({s.n, kk, s.h, s.w}, kF64);
      const Tensor dw_kk = conv2d_backward_weight(g_kk.to(kF32), x.to(kF32), {kk, s.c, 3, 3}, p);
      EXPECT_LT(max_abs_diff(dw_kk, conv2d_backward_weight(g_kk, x, {kk, s.c, 3, 3}, p)), 1e-3)
          << kk << " channels, width " << s.w;
    }
  }
}

// The stride-2 direct kernels (forward, input gradient and weight gradient): even and odd
// heights and widths (the padded rows split into even and odd ones of unequal counts; dx's four
// parity classes of unequal sizes), whole and partial channel blocks, against the definition
// and f64.
TEST(Conv2d, Direct3x3StrideTwoMatchesTheDefinition) {
  Conv2dParams p;
  p.padding = {1, 1};
  p.stride = {2, 2};
  struct Shape4 {
    int64_t n, c, k, h, w;
  };
  for (const Shape4& s : {Shape4{2, 3, 16, 14, 14}, Shape4{1, 5, 8, 7, 7}, Shape4{2, 2, 32, 6, 9},
                          Shape4{1, 4, 24, 9, 28}, Shape4{9, 3, 16, 5, 4}}) {
    const Tensor x = randn({s.n, s.c, s.h, s.w}, kF64), w = randn({s.k, s.c, 3, 3}, kF64);
    const Tensor b = randn({s.k}, kF64);
    const Tensor y = conv2d(x.to(kF32), w.to(kF32), b.to(kF32), p);
    const Tensor expected = naive_conv(x, w, b, p);
    ASSERT_EQ(y.shape(), expected.shape());
    EXPECT_LT(max_abs_diff(y, expected), 1e-4) << s.k << " channels, " << s.h << "x" << s.w;
    const Tensor gy = randn(expected.shape(), kF64);
    // The input gradient: its channels (s.c) are the lanes, so the direct kernel takes c % 8
    // == 0; widen the input to 8 or 16 channels for that.
    const int64_t c8 = (s.c + 7) / 8 * 8;
    const Tensor w8 = randn({s.k, c8, 3, 3}, kF64);
    const Tensor dx = conv2d_backward_input(gy.to(kF32), w8.to(kF32), {s.n, c8, s.h, s.w}, p);
    EXPECT_LT(max_abs_diff(dx, conv2d_backward_input(gy, w8, {s.n, c8, s.h, s.w}, p)), 1e-4)
        << s.k << " channels, " << s.h << "x" << s.w;
    for (int64_t kk : {s.k, int64_t{3}}) {
      const Tensor g_kk = gy.narrow(1, 0, kk).contiguous();
      const Tensor dw = conv2d_backward_weight(g_kk.to(kF32), x.to(kF32), {kk, s.c, 3, 3}, p);
      EXPECT_LT(max_abs_diff(dw, conv2d_backward_weight(g_kk, x, {kk, s.c, 3, 3}, p)), 1e-3)
          << kk << " channels, " << s.h << "x" << s.w;
    }
  }
}

TEST(Conv2d, BackwardPassesAreTheAdjoints) {
  // conv is linear in x and in w, so <g, conv(x, w)> = <dx(g, w), x> = <dw(g, x), w>.
  for (const ConvCase& c : conv_cases()) {
    Tensor x = randn(c.x, kF64), w = randn(c.w, kF64);
    Tensor y = conv2d(x, w, Tensor(), c.p);
    Tensor g = randn(y.shape(), kF64);
    const double lhs = sum(g * y).item();
    const double via_input = sum(conv2d_backward_input(g, w, x.shape(), c.p) * x).item();
    const double via_weight = sum(conv2d_backward_weight(g, x, w.shape(), c.p) * w).item();
    EXPECT_NEAR(via_input, lhs, 1e-9 * (1 + std::fabs(lhs)));
    EXPECT_NEAR(via_weight, lhs, 1e-9 * (1 + std::fabs(lhs)));
  }
}

TEST(Conv2d, ResultsDoNotDependOnTheThreadCount) {
  Conv2dParams p;
  p.padding = {1, 1};
  const Tensor x = randn({9, 4, 6, 6}), w = randn({5, 4, 3, 3});
  const Tensor g = randn({9, 5, 6, 6});
  const int before = num_threads();
  set_num_threads(1);
  const Tensor y1 = conv2d(x, w, Tensor(), p), dw1 = conv2d_backward_weight(g, x, w.shape(), p);
  set_num_threads(2);
  const Tensor y2 = conv2d(x, w, Tensor(), p), dw2 = conv2d_backward_weight(g, x, w.shape(), p);
  set_num_threads(before);
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
  EXPECT_EQ(dw1.to_vector<float>(), dw2.to_vector<float>());
}

// bf16 runs through oneDNN on CPUs with AVX-512 BF16 (tensor/cpu/conv_onednn.h): forward (with
// and without bias) and both backwards, for strides, padding, dilation and groups, against the
// f32 kernels on the same bf16 values.
TEST(Conv2d, BF16MatchesF32OnTheSameValues) {
  Conv2dParams plain, strided, dilated, grouped;
  plain.padding = {1, 1};
  strided.stride = {2, 2};
  strided.padding = {1, 0};
  dilated.dilation = {2, 1};
  dilated.padding = {2, 1};
  grouped.groups = 4;
  grouped.padding = {1, 1};
  Generator g(77);
  const auto bf = [&g](const Shape& s) { return randn(s, kF32, &g).to(kBF16); };
  for (const Conv2dParams& p : {plain, strided, dilated, grouped}) {
    const int64_t c = 8, o = 16;
    const Tensor x = bf({3, c, 11, 10}), w = bf({o, c / p.groups, 3, 3}), b = bf({o});
    const auto close = [](const Tensor& got, const Tensor& want, const char* what) {
      ASSERT_EQ(got.dtype(), kBF16) << what;
      const Tensor ref = want.to(kBF16).to(kF32);
      const double scale = amax(abs(ref)).item();
      EXPECT_LT(max_abs_diff(got.to(kF32), ref), 1e-2 * scale) << what;
    };
    for (const Tensor& bias : {b, Tensor()}) {
      const Tensor y = conv2d(x, w, bias, p);
      close(y, conv2d(x.to(kF32), w.to(kF32), bias.defined() ? bias.to(kF32) : Tensor(), p),
            "forward");
    }
    const Tensor y = conv2d(x, w, Tensor(), p);
    const Tensor dy = bf(y.shape());
    close(conv2d_backward_input(dy, w, x.shape(), p),
          conv2d_backward_input(dy.to(kF32), w.to(kF32), x.shape(), p), "backward input");
    close(conv2d_backward_weight(dy, x, w.shape(), p),
          conv2d_backward_weight(dy.to(kF32), x.to(kF32), w.shape(), p), "backward weight");
  }
}

TEST(Conv2d, ErrorsNameShapes) {
  EXPECT_THROW(conv2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3}), Tensor(), {}), Error);
  EXPECT_THROW(conv2d(zeros({1, 3, 2, 2}), zeros({4, 3, 3, 3}), Tensor(), {}), Error);
  EXPECT_THROW(conv2d(zeros({3, 5, 5}), zeros({4, 3, 3, 3}), Tensor(), {}), Error);
}

TEST(Pool, MaxPoolValuesAndIndices) {
  Tensor x = from_vector<float>({1, 5, 2, 0,
                                 3, 4, 8, 1,
                                 0, 2, 6, 7,
                                 9, 1, 3, 2}, {1, 1, 4, 4});
  Pool2dParams p;
  p.kernel = {2, 2};
  p.stride = {2, 2};
  auto [y, idx] = max_pool2d_with_indices(x, p);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 8, 9, 7}));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{1, 6, 12, 11}));
  Tensor g = max_pool2d_backward(ones({1, 1, 2, 2}), idx, x.shape());
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0,
                                                      0, 0, 0, 1, 1, 0, 0, 0}));
}

TEST(Pool, AvgPoolCountsPaddingAsPyTorchDoes) {
  Tensor x = ones({1, 1, 3, 3});
  Pool2dParams p;
  p.kernel = {2, 2};
  p.stride = {2, 2};
  p.padding = {1, 1};
  // Corner window covers one real element and three padded ones.
  EXPECT_EQ(avg_pool2d(x, p).at({0, 0, 0, 0}), 0.25);
  p.count_include_pad = false;
  EXPECT_EQ(avg_pool2d(x, p).at({0, 0, 0, 0}), 1.0);
}

TEST(Pool, AdaptiveAveragePool) {
  Tensor x = arange(0, 2 * 5 * 7, 1, kF64).view({1, 2, 5, 7});
  Tensor y = adaptive_avg_pool2d(x, {1, 1});
  EXPECT_NEAR(y.at({0, 1, 0, 0}), mean(x.select(1, 1)).item(), 1e-12);
  Tensor z = adaptive_avg_pool2d(x, {2, 3});  // windows rows [0,3) [2,5); cols [0,3) [2,5) [4,7)
  EXPECT_NEAR(z.at({0, 0, 1, 2}),
              mean(x.select(1, 0).narrow(1, 2, 3).narrow(2, 4, 3)).item(), 1e-12);
  Tensor g = adaptive_avg_pool2d_backward(ones({1, 2, 1, 1}, kF64), x.shape());
  EXPECT_NEAR(g.at({0, 0, 4, 6}), 1.0 / 35, 1e-15);
}

TEST(Softmax, MatchesFormulaAlongAnyDim) {
  Tensor x = randn({3, 4, 5}, kF64) * 10.0;
  for (int64_t dim : {0, 1, 2}) {
    Tensor s = softmax(x, dim);
    Tensor want = exp(x) / sum(exp(x), {dim}, true);
    EXPECT_LT(max_abs_diff(s, want), 1e-12);
    EXPECT_LT(max_abs_diff(log_softmax(x, dim), log(want)), 1e-10);
  }
  // Large logits: subtracting the max keeps it finite.
  Tensor big = from_vector<float>({1000, 1001}, {1, 2});
  EXPECT_NEAR(softmax(big, 1).at({0, 1}), 1 / (1 + std::exp(-1.0)), 1e-6);
}

TEST(BatchNorm, TrainingNormalizesAndUpdatesRunningStats) {
  Tensor x = randn({4, 3, 2, 2}, kF64) * 3.0 + 1.0;
  Tensor w = from_vector<double>({1, 2, 3}, {3}), b = from_vector<double>({0, 1, -1}, {3});
  Tensor rm = zeros({3}, kF64), rv = ones({3}, kF64);
  BatchNormResult r = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  for (int64_t c = 0; c < 3; ++c) {
    Tensor xc = x.select(1, c);
    const double m = mean(xc).item(), v = var(xc, {}, 0).item();
    Tensor want = (xc - m) / std::sqrt(v + 1e-5) * w.at({c}) + b.at({c});
    EXPECT_LT(max_abs_diff(r.output.select(1, c), want), 1e-10);
    EXPECT_NEAR(rm.at({c}), 0.1 * m, 1e-12);
    EXPECT_NEAR(rv.at({c}), 0.9 + 0.1 * var(xc, {}, 1).item(), 1e-12);  // unbiased
  }
  BatchNormResult e = batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5);
  const double want = (x.at({0, 2, 1, 1}) - rm.at({2})) / std::sqrt(rv.at({2}) + 1e-5) * 3 - 1;
  EXPECT_NEAR(e.output.at({0, 2, 1, 1}), want, 1e-12);
  EXPECT_THROW(batch_norm(zeros({1, 3}), w, b, rm, rv, true, 0.1, 1e-5), Error);
}

// The f32 kernels (vector sums, images in blocks of 8) against f64: maps smaller than one
// vector, with a partial last vector, and whole vectors; one and several image blocks; and the
// same bits at 1 and 2 threads.
TEST(BatchNorm, F32MatchesF64AndDoesNotDependOnTheThreadCount) {
  struct Shape4 {
    int64_t n, c, h, w;
  };
  for (const Shape4& s : {Shape4{10, 3, 7, 7}, Shape4{2, 5, 3, 5}, Shape4{9, 2, 8, 8}}) {
    const Tensor x = randn({s.n, s.c, s.h, s.w}, kF64) * 2.0 + 0.5;
    const Tensor g = randn({s.n, s.c, s.h, s.w}, kF64);
    const Tensor w = randn({s.c}, kF64), b = randn({s.c}, kF64);
    const BatchNormResult r64 = batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);
    const BatchNormGrads g64 =
        batch_norm_backward(g, x, w, r64.mean, r64.invstd, true, true, true);
    const int before = num_threads();
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const Tensor x32 = x.to(kF32), w32 = w.to(kF32);
      const BatchNormResult r = batch_norm(x32, w32, b.to(kF32), Tensor(), Tensor(), true, 0.1,
                                           1e-5);
      const BatchNormGrads d =
          batch_norm_backward(g.to(kF32), x32, w32, r.mean, r.invstd, true, true, true);
      EXPECT_LT(max_abs_diff(r.output, r64.output), 1e-4) << s.h << "x" << s.w;
      EXPECT_LT(max_abs_diff(r.mean, r64.mean), 1e-5);
      EXPECT_LT(max_abs_diff(r.invstd, r64.invstd), 1e-5);
      EXPECT_LT(max_abs_diff(d.input, g64.input), 1e-4) << s.h << "x" << s.w;
      EXPECT_LT(max_abs_diff(d.weight, g64.weight), 1e-3);
      EXPECT_LT(max_abs_diff(d.bias, g64.bias), 1e-3);
      std::vector<float> all = r.output.to_vector<float>();
      for (const Tensor& t : {r.mean, r.invstd, d.input, d.weight, d.bias}) {
        const std::vector<float> v = t.to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
      }
      runs.push_back(all);
    }
    set_num_threads(before);
    EXPECT_EQ(runs[0], runs[1]);
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The fused cross-entropy against the formula written out in f64:
// loss_i = -(1 - eps) logp_i[t_i] - eps / C sum_c logp_ic, grad = (softmax - q) * row_grad.
TEST(CrossEntropyRows, MatchesTheFormulaWithLabelSmoothing) {
  const std::vector<double> x = {1.0, -2.0, 0.5, 3.0, 3.0, -1.0};
  const std::vector<int64_t> t = {2, 0};
  const double eps = 0.2;
  const CrossEntropyRows r =
      cross_entropy_rows(from_vector<double>(x, {2, 3}), from_vector<int64_t>(t, {2}), eps);
  const Tensor grad = cross_entropy_rows_backward(r.log_probs, from_vector<int64_t>(t, {2}),
                                                  from_vector<double>({0.5, 2.0}, {2}), eps);
  const std::vector<double> scale = {0.5, 2.0};
  for (int i = 0; i < 2; ++i) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(x[3 * i + c]);
    double loss = 0;
    for (int c = 0; c < 3; ++c) {
      const double logp = x[3 * i + c] - std::log(z);
      const double q = (c == t[i] ? 1 - eps : 0) + eps / 3;
      loss -= q * logp;
      EXPECT_NEAR(r.log_probs.at({i, c}), logp, 1e-12);
      EXPECT_NEAR(grad.at({i, c}), (std::exp(logp) - q) * scale[i], 1e-12);
    }
    EXPECT_NEAR(r.loss.at({i}), loss, 1e-12);
  }
  EXPECT_THROW(cross_entropy_rows(zeros({2, 3}), from_vector<int64_t>({0, -1}, {2})), Error);
}

}  // namespace
}  // namespace tessera
