// Channels-blocked tensors (tensor.h's MemoryFormat::kChannelsBlocked, oneDNN's nChw16c):
//   - the layout itself: element (n, c, h, w) at [n][c / 16][h][w][c % 16] of the storage,
//     conversions both ways, and the operations that need strides refusing, naming it;
//   - elementwise ops (blocked with blocked, with NCHW, with broadcast operands, in place);
//   - convolutions (Conv2dParams::channels_blocked): every pass against the NCHW op, within f32
//     rounding of f64, for 1x1, 3x3 (Winograd's shapes too), strided and 7x7 layers and an RGB
//     input that stays NCHW;
//   - batch norm and batch norm + ReLU (+ residual), forward and backward, training and eval:
//     the NCHW kernels' formulas with the sums in another order, so within f32 rounding;
//   - max pooling: outputs, indices and gradients bit for bit.
#include <gtest/gtest.h>

#include <string>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

constexpr MemoryFormat kBlocked = MemoryFormat::kChannelsBlocked;

Tensor seeded(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, kF32, &g);
}

// |a - b| <= tol * max|b| elementwise (a relative bound on the tensor's scale).
void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const double scale = std::max(1.0, amax(abs(b.to(kF64)), {}).item());
  EXPECT_LE(max_abs_diff(a, b), tol * scale) << what;
}

void expect_throws_naming_layout(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << " did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channels-blocked (nChw16c"), std::string::npos)
        << what << ": " << e.what();
  }
}

TEST(ChannelsBlocked, LayoutAndConversions) {
  const Tensor x = seeded({2, 32, 3, 5}, 1);
  const Tensor y = x.contiguous(kBlocked);
  EXPECT_TRUE(y.is_channels_blocked());
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_FALSE(y.is_channels_last());
  EXPECT_TRUE(y.is_contiguous(kBlocked));
  EXPECT_TRUE(y.contiguous(kBlocked).is_same(y));
  EXPECT_EQ(y.shape(), x.shape());
  // The storage: [n][c / 16][h][w][c % 16].
  const Tensor blocks = y.channel_blocks();
  EXPECT_EQ(blocks.shape(), (Shape{2, 2, 3, 5, 16}));
  EXPECT_TRUE(blocks.is_contiguous());
  const float* p = blocks.data<float>();
  const auto at = [](int64_t n, int64_t c, int64_t h, int64_t w) {
    return (((n * 2 + c / 16) * 3 + h) * 5 + w) * 16 + c % 16;
  };
  const std::vector<float> v = x.to_vector<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 32; ++c)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t w = 0; w < 5; ++w)
          ASSERT_EQ(p[at(n, c, h, w)], v[((n * 32 + c) * 3 + h) * 5 + w]) << n << c << h << w;
  // Back, and through everything that reads values: exact.
  EXPECT_EQ(max_abs_diff(y.contiguous(), x), 0.0);
  EXPECT_EQ(max_abs_diff(y.contiguous(MemoryFormat::kChannelsLast), x), 0.0);
  EXPECT_EQ(max_abs_diff(y.clone(), x), 0.0);
  EXPECT_TRUE(y.clone().is_contiguous());
  EXPECT_EQ(max_abs_diff(y.to(kF64), x.to(kF64)), 0.0);
  EXPECT_EQ(y.at({1, 17, 2, 4}), x.at({1, 17, 2, 4}));
  EXPECT_EQ(max_abs_diff(y.reshape({2, -1}), x.reshape({2, -1})), 0.0);
  EXPECT_EQ(max_abs_diff(y.flatten(1), x.flatten(1)), 0.0);
  EXPECT_DOUBLE_EQ(sum(y).item(), sum(x).item());
  EXPECT_EQ(max_abs_diff(sum(y, {0, 2, 3}), sum(x, {0, 2, 3})), 0.0);
  // Writes: copy_ into a blocked tensor from NCHW and NHWC ones, fill_.
  Tensor z = empty(x.shape(), kF32, kBlocked);
  z.copy_(x.contiguous(MemoryFormat::kChannelsLast));
  EXPECT_EQ(max_abs_diff(z, x), 0.0);
  z.copy_(seeded({1, 32, 1, 5}, 2));  // broadcast over N and H
  EXPECT_EQ(max_abs_diff(z, seeded({1, 32, 1, 5}, 2).expand(x.shape())), 0.0);
  z.fill_(3.5);
  EXPECT_EQ(max_abs_diff(z, full(x.shape(), 3.5)), 0.0);
  // A channel strided NHWC view into blocks and back.
  const Tensor nhwc_blocks = x.contiguous(MemoryFormat::kChannelsLast).channel_blocks();
  EXPECT_EQ(max_abs_diff(nhwc_blocks, blocks), 0.0);
}

TEST(ChannelsBlocked, WhatNeedsStridesRefusesNamingTheLayout) {
  const Tensor y = seeded({2, 16, 4, 4}, 3).contiguous(kBlocked);
  expect_throws_naming_layout([&] { (void)y.strides(); }, "strides()");
  expect_throws_naming_layout([&] { (void)y.stride(1); }, "stride(1)");
  expect_throws_naming_layout([&] { (void)y.data<float>(); }, "data()");
  expect_throws_naming_layout([&] { (void)y.view({2, 256}); }, "view");
  expect_throws_naming_layout([&] { (void)y.narrow(1, 0, 8); }, "narrow");
  expect_throws_naming_layout([&] { (void)y.select(0, 1); }, "select");
  expect_throws_naming_layout([&] { (void)y.transpose(2, 3); }, "transpose");
  expect_throws_naming_layout([&] { (void)y.permute({0, 2, 3, 1}); }, "permute");
  expect_throws_naming_layout([&] { (void)y.unsqueeze(0); }, "unsqueeze");
  // The layout needs 4 dims and whole blocks of 16 channels.
  EXPECT_THROW(seeded({2, 24, 4, 4}, 4).contiguous(kBlocked), Error);
  EXPECT_THROW(seeded({2, 16, 4}, 4).contiguous(kBlocked), Error);
  EXPECT_THROW(empty({2, 8, 4, 4}, kF32, kBlocked), Error);
}

TEST(ChannelsBlocked, ElementwiseOps) {
  const Tensor a = seeded({2, 32, 5, 3}, 5), b = seeded({2, 32, 5, 3}, 6);
  const Tensor ab = a.contiguous(kBlocked), bb = b.contiguous(kBlocked);
  const Tensor both = add(ab, bb);
  EXPECT_TRUE(both.is_channels_blocked());
  EXPECT_EQ(max_abs_diff(both, add(a, b)), 0.0);
  const Tensor mixed = mul(a, bb);
  EXPECT_TRUE(mixed.is_channels_blocked());
  EXPECT_EQ(max_abs_diff(mixed, mul(a, b)), 0.0);
  const Tensor r = relu(ab);
  EXPECT_TRUE(r.is_channels_blocked());
  EXPECT_EQ(max_abs_diff(r, relu(a)), 0.0);
  // A broadcast operand: computed on NCHW.
  const Tensor c = seeded({32, 1, 1}, 7);
  EXPECT_EQ(max_abs_diff(add(ab, c), add(a, c)), 0.0);
  EXPECT_EQ(max_abs_diff(add(ab, 2.0), add(a, 2.0)), 0.0);
  EXPECT_EQ(max_abs_diff(gt(ab, bb), gt(a, b)), 0.0);
  // In place: into a blocked tensor from either layout, and into an NCHW one from a blocked.
  Tensor acc = ab.clone().contiguous(kBlocked);
  add_(acc, b);
  add_(acc, bb, 2.0);
  EXPECT_TRUE(acc.is_channels_blocked());
  EXPECT_LE(max_abs_diff(acc, add(a, mul(b, 3.0))), 1e-5);
  Tensor plain = a.clone();
  add_(plain, bb);
  EXPECT_TRUE(plain.is_contiguous());
  EXPECT_EQ(max_abs_diff(plain, add(a, b)), 0.0);
  mul_(acc, c);
  EXPECT_LE(max_abs_diff(acc, mul(add(a, mul(b, 3.0)), c)), 1e-5);
}

// conv2d and its passes with params.channels_blocked against the NCHW op on the same values.
void expect_conv_matches(int64_t n, int64_t c, int64_t k, int64_t h, int64_t w, int64_t kernel,
                         int64_t stride) {
  const std::string what = "conv " + std::to_string(c) + "->" + std::to_string(k) + " " +
                           std::to_string(kernel) + "x" + std::to_string(kernel) + "/" +
                           std::to_string(stride) + " on " + std::to_string(h) + "x" +
                           std::to_string(w);
  Conv2dParams p;
  p.stride = {stride, stride};
  p.padding = {kernel / 2, kernel / 2};
  Conv2dParams pb = p;
  pb.channels_blocked = true;
  const Tensor x = seeded({n, c, h, w}, 11), wt = mul(seeded({k, c, kernel, kernel}, 12), 0.1);
  const Tensor y = conv2d(x, wt, Tensor(), p);
  const Tensor yb = conv2d(x, wt, Tensor(), pb);
  EXPECT_EQ(yb.is_channels_blocked(), k % 16 == 0) << what;
  expect_close(yb, y, 1e-5, what + " forward");
  const Tensor dy = seeded(y.shape(), 13);
  const Tensor dyb = k % 16 == 0 ? dy.contiguous(kBlocked) : dy;
  const Tensor dx = conv2d_backward_input(dy, wt, x.shape(), p);
  const Tensor dxb = conv2d_backward_input(dyb, wt, x.shape(), pb);
  EXPECT_EQ(dxb.is_channels_blocked(), c % 16 == 0) << what;
  expect_close(dxb, dx, 1e-5, what + " input gradient");
  const Tensor xb = c % 16 == 0 ? x.contiguous(kBlocked) : x;
  const Tensor dw = conv2d_backward_weight(dy, x, wt.shape(), p);
  expect_close(conv2d_backward_weight(dyb, xb, wt.shape(), pb), dw, 1e-5, what + " weight grad");
  const auto [jx, jw] = conv2d_backward(dyb, xb, wt, x.shape(), pb, true, true);
  expect_close(jx, dx, 1e-5, what + " joint input gradient");
  expect_close(jw, dw, 1e-5, what + " joint weight gradient");
  // A blocked input alone asks for the layout.
  EXPECT_EQ(conv2d(xb, wt, Tensor(), p).is_channels_blocked(), c % 16 == 0 && k % 16 == 0)
      << what;
}

TEST(ChannelsBlocked, ConvolutionsMatchNchw) {
  ASSERT_TRUE(backend(Device::cpu()).channels_blocked(ChannelsLastKernel::kConv2d, kF32));
  expect_conv_matches(2, 32, 64, 9, 7, 1, 1);    // 1x1
  expect_conv_matches(2, 64, 32, 9, 9, 1, 2);    // strided projection, odd map
  expect_conv_matches(2, 32, 32, 10, 10, 3, 1);  // Winograd's shapes
  expect_conv_matches(1, 16, 48, 7, 5, 3, 2);    // stride 2, batch 1
  expect_conv_matches(2, 3, 16, 15, 15, 7, 2);   // the stem: RGB input stays NCHW
  expect_conv_matches(2, 16, 8, 6, 6, 3, 1);     // 8 outputs: NCHW output
}

// batch_norm / batch_norm_relu (training and eval) and their backwards on blocked operands
// against NCHW ones; the grad may come in NCHW (as from the head's pooling).
void expect_batch_norm_matches(const Shape& shape, bool residual, bool training) {
  const std::string what = "batch norm " + std::to_string(shape[1]) + "x" +
                           std::to_string(shape[2]) + "x" + std::to_string(shape[3]) +
                           (residual ? " + residual" : "") + (training ? "" : " (eval)");
  const Tensor x = add(mul(seeded(shape, 21), 2.0), 0.5), g = seeded(shape, 22);
  const Tensor res = residual ? seeded(shape, 23) : Tensor();
  const int64_t c = shape[1];
  const Tensor w = add(seeded({c}, 24), 1.0), b = seeded({c}, 25);
  const Tensor rm = mul(seeded({c}, 26), 0.1), rv = add(abs(seeded({c}, 27)), 0.5);
  const Tensor xb = x.contiguous(kBlocked);
  const Tensor resb = residual ? res.contiguous(kBlocked) : Tensor();
  // Plain batch norm.
  {
    Tensor rm1 = rm.clone(), rv1 = rv.clone(), rm2 = rm.clone(), rv2 = rv.clone();
    const BatchNormResult r = batch_norm(x, w, b, rm1, rv1, training, 0.1, 1e-5);
    const BatchNormResult rb = batch_norm(xb, w, b, rm2, rv2, training, 0.1, 1e-5);
    EXPECT_TRUE(rb.output.is_channels_blocked()) << what;
    expect_close(rb.output, r.output, 2e-5, what + " output");
    expect_close(rm2, rm1, 1e-6, what + " running mean");
    expect_close(rv2, rv1, 1e-5, what + " running var");
    const BatchNormGrads d = batch_norm_backward(g, x, w, r.mean, r.invstd, training, true, true);
    for (const Tensor& gg : {g.contiguous(kBlocked), g}) {
      const BatchNormGrads db =
          batch_norm_backward(gg, xb, w, rb.mean, rb.invstd, training, true, true);
      EXPECT_TRUE(db.input.is_channels_blocked()) << what;
      expect_close(db.input, d.input, 2e-5, what + " input gradient");
      expect_close(db.weight, d.weight, 2e-5, what + " weight gradient");
      expect_close(db.bias, d.bias, 2e-5, what + " bias gradient");
    }
  }
  // Batch norm + ReLU (+ residual).
  Tensor rm1 = rm.clone(), rv1 = rv.clone(), rm2 = rm.clone(), rv2 = rv.clone();
  const BatchNormResult r = batch_norm_relu(x, w, b, res, rm1, rv1, training, 0.1, 1e-5);
  const BatchNormResult rb = batch_norm_relu(xb, w, b, resb, rm2, rv2, training, 0.1, 1e-5);
  EXPECT_TRUE(rb.output.is_channels_blocked()) << what;
  expect_close(rb.output, r.output, 2e-5, what + " relu output");
  const BatchNormReluGrads d = batch_norm_relu_backward(g, r.output, x, w, r.mean, r.invstd,
                                                        training, true, true, residual);
  // Against the NCHW output's mask (the two outputs may differ in the sign of a rounding-level
  // value), the blocked kernels given the NCHW run's output as blocked.
  const Tensor yb = r.output.contiguous(kBlocked);
  for (bool need_input : {true, false}) {
    const BatchNormReluGrads db = batch_norm_relu_backward(
        g.contiguous(kBlocked), yb, xb, w, rb.mean, rb.invstd, training, need_input, true,
        residual);
    if (need_input) {
      EXPECT_TRUE(db.input.is_channels_blocked()) << what;
      expect_close(db.input, d.input, 2e-5, what + " relu input gradient");
    }
    expect_close(db.weight, d.weight, 2e-5, what + " relu weight gradient");
    expect_close(db.bias, d.bias, 2e-5, what + " relu bias gradient");
    if (residual) expect_close(db.residual, d.residual, 0.0, what + " residual gradient");
  }
}

TEST(ChannelsBlocked, BatchNormMatchesNchw) {
  for (bool training : {true, false}) {
    expect_batch_norm_matches({4, 32, 5, 7}, false, training);
    expect_batch_norm_matches({2, 48, 17, 19}, true, training);  // > 256 rows per image
    expect_batch_norm_matches({1, 16, 1, 3}, true, training);
  }
}

TEST(ChannelsBlocked, BatchNormDoesNotDependOnTheThreadCount) {
  const Tensor x = seeded({3, 64, 20, 20}, 31).contiguous(kBlocked);
  const Tensor g = seeded({3, 64, 20, 20}, 32).contiguous(kBlocked);
  const Tensor w = ones({64}), b = zeros({64});
  const int threads = num_threads();
  std::vector<std::vector<float>> runs;
  for (int t : {1, 2}) {
    set_num_threads(t);
    const BatchNormResult r = batch_norm_relu(x, w, b, Tensor(), Tensor(), Tensor(), true, 0.1,
                                              1e-5);
    const BatchNormReluGrads d = batch_norm_relu_backward(g, r.output, x, w, r.mean, r.invstd,
                                                          true, true, true, false);
    std::vector<float> all = r.output.to_vector<float>();
    for (const Tensor& t2 : {d.input, d.weight, d.bias, r.mean, r.invstd}) {
      const std::vector<float> v = t2.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
    runs.push_back(all);
  }
  set_num_threads(threads);
  EXPECT_EQ(runs[0], runs[1]);
}

void expect_max_pool_matches(const Shape& shape, int64_t kernel, int64_t stride,
                             int64_t padding) {
  const std::string what = "max pool " + std::to_string(kernel) + "/" + std::to_string(stride) +
                           " on " + std::to_string(shape[2]) + "x" + std::to_string(shape[3]);
  const Tensor x = seeded(shape, 41);
  Pool2dParams p;
  p.kernel = {kernel, kernel};
  p.stride = {stride, stride};
  p.padding = {padding, padding};
  const auto [y, idx] = max_pool2d_with_indices(x, p);
  const auto [yb, idxb] = max_pool2d_with_indices(x.contiguous(kBlocked), p);
  EXPECT_EQ(max_abs_diff(yb, y), 0.0) << what;
  EXPECT_EQ(max_abs_diff(idxb, idx), 0.0) << what;
  const Tensor g = seeded(y.shape(), 42);
  const Tensor dx = max_pool2d_backward(g, idx, x.shape());
  const Tensor dxb = max_pool2d_backward(g.contiguous(kBlocked), idxb, x.shape());
  EXPECT_EQ(max_abs_diff(dxb, dx), 0.0) << what;
}

TEST(ChannelsBlocked, MaxPoolingMatchesNchwBitForBit) {
  const Tensor x = seeded({2, 32, 11, 12}, 41).contiguous(kBlocked);
  Pool2dParams p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  p.padding = {1, 1};
  const auto [yb, idxb] = max_pool2d_with_indices(x, p);
  EXPECT_TRUE(yb.is_channels_blocked());
  EXPECT_TRUE(idxb.is_channels_blocked());
  EXPECT_TRUE(max_pool2d_backward(seeded(yb.shape(), 42), idxb, x.shape()).is_channels_blocked());
  expect_max_pool_matches({2, 32, 11, 12}, 3, 2, 1);
  expect_max_pool_matches({1, 16, 7, 5}, 2, 2, 0);
  // A 1x1 map padded to a larger output: its blocked view is NCHW and NHWC at once.
  expect_max_pool_matches({2, 32, 1, 1}, 2, 1, 1);
}

// Ops without kernels for the layout read it as NCHW: the same values as on NCHW operands.
TEST(ChannelsBlocked, OpsWithoutBlockedKernelsReadItConverted) {
  const Tensor a = seeded({2, 16, 3, 4}, 51), b = seeded({2, 16, 3, 4}, 52);
  const Tensor ab = a.contiguous(kBlocked), bb = b.contiguous(kBlocked);
  EXPECT_EQ(max_abs_diff(softmax(ab, 1), softmax(a, 1)), 0.0);
  EXPECT_EQ(max_abs_diff(log_softmax(ab, 3), log_softmax(a, 3)), 0.0);
  EXPECT_EQ(max_abs_diff(softmax_backward(bb, softmax(ab, 1), 1),
                         softmax_backward(b, softmax(a, 1), 1)), 0.0);
  EXPECT_EQ(max_abs_diff(where(gt(ab, 0.0), ab, bb), where(gt(a, 0.0), a, b)), 0.0);
  const Tensor bt = b.transpose(2, 3).contiguous();  // [2, 16, 4, 3]
  EXPECT_EQ(max_abs_diff(matmul(ab, bt.contiguous(kBlocked)), matmul(a, bt)), 0.0);
  const std::vector<Tensor> parts = split(ab, 8, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(max_abs_diff(parts[1], a.narrow(1, 8, 8)), 0.0);
  EXPECT_EQ(max_abs_diff(stack({ab, bb}, 0), stack({a, b}, 0)), 0.0);
  const Tensor index = from_vector<int64_t>({3, 0, 2}, {3});
  EXPECT_EQ(max_abs_diff(index_select(ab, 1, index), index_select(a, 1, index)), 0.0);
  const Tensor zero = zeros({2, 16, 3, 4});
  const Tensor where_to = zeros({2, 16, 3, 4}, kI64);
  EXPECT_EQ(max_abs_diff(scatter_add(zero, 3, where_to, bb), scatter_add(zero, 3, where_to, b)),
            0.0);
}

}  // namespace
}  // namespace tessera
