// Convolutions on channels-last tensors (tensor.h's MemoryFormat) against NCHW ones and f64:
//   - convolutions keep NCHW where the backend has no channels-last kernel for the dtype; f32
//     ones (oneDNN on NHWC) give NHWC results held to f64's; bf16 ones on oneDNN give NHWC
//     results equal bit for bit to the NCHW path's (weight gradients that run as matmuls on
//     NHWC, tensor/cpu/conv_nhwc_matmul.h, within one bf16 rounding), and NHWC results from
//     NCHW inputs too where their kernels prefer that layout (Backend::prefers_channels_last:
//     AMX);
//   - the backward passes that run as matmuls on NHWC are held to f64, and an empty batch
//     gives zero weight gradients.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <string>

#include "tensor/accelerator.h"
#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tests/tensor/channels_last_util.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace {

TEST(ChannelsLast, ConvolutionsWithoutChannelsLastKernelsStayNchw) {
  Conv2dParams p;
  p.padding = {1, 1};
  p.channels_last = true;
  for (DType dtype : {kF64, kF16}) {
    ASSERT_FALSE(backend(Device::cpu()).channels_last(ChannelsLastKernel::kConv2d, dtype));
    const Tensor x = seeded({2, 3, 6, 5}, 40, dtype), w = seeded({4, 3, 3, 3}, 41, dtype);
    Conv2dParams plain = p;
    plain.channels_last = false;
    const Tensor want = conv2d(x, w, Tensor(), plain);
    for (const Tensor& in : {x, x.contiguous(kCL)}) {
      const Tensor y = conv2d(in, w, Tensor(), p);
      EXPECT_TRUE(y.is_contiguous());
      EXPECT_EQ(max_abs_diff(y, want), 0.0);
    }
  }
}

// f32 channels-last convolutions run oneDNN's direct primitives on NHWC as it is (Winograd's on
// nChw16c, reordered), where the NCHW ones run tessera's direct or im2col kernels (or oneDNN's,
// reordered): the same products in another order, so both are held to the f64 result. Shapes: whole
// and partial blocks of 16 channels, strides 1 and 2, a 1x1 projection, the 3-channel 7x7 stem and
// a Winograd layer.
TEST(ChannelsLast, F32ConvolutionsOnOneDnnGiveNhwcResults) {
  ASSERT_TRUE(backend(Device::cpu()).channels_last(ChannelsLastKernel::kConv2d, kF32));
  struct Case {
    Shape x, w;
    int64_t stride, pad;
  };
  for (const Case& k : {Case{{2, 16, 9, 10}, {32, 16, 3, 3}, 1, 1},
                        Case{{1, 48, 13, 11}, {40, 48, 3, 3}, 2, 1},
                        Case{{2, 24, 8, 7}, {40, 24, 1, 1}, 2, 0},
                        Case{{1, 3, 20, 18}, {16, 3, 7, 7}, 2, 3},
                        // One input channel: the input is NCHW and NHWC at once, the output NHWC.
                        Case{{2, 1, 12, 10}, {16, 1, 3, 3}, 1, 1},
                        // Winograd's shapes (tensor/accelerator.h): reordered into nChw16c and
                        // back to NHWC.
                        Case{{2, 32, 9, 10}, {48, 32, 3, 3}, 1, 1}}) {
    Conv2dParams p, q;
    p.stride = q.stride = {k.stride, k.stride};
    p.padding = q.padding = {k.pad, k.pad};
    q.channels_last = true;
    const Tensor x = seeded(k.x, 60), w = seeded(k.w, 61);  // f64: the reference
    const Tensor x32 = x.to(kF32), w32 = w.to(kF32);
    const Tensor want = conv2d(x, w, Tensor(), p);
    const double tol = 1e-5 * std::sqrt(static_cast<double>(w.numel() / w.size(0)));
    const Tensor y = conv2d(x32.contiguous(kCL), w32, Tensor(), q);
    EXPECT_TRUE(nhwc(y));
    EXPECT_LE(max_abs_diff(y.to(kF64), want), tol);
    const Tensor g = seeded(want.shape(), 62);
    const auto [dx, dw] = conv2d_backward(g, x, w, x.shape(), p, true, true);
    const Tensor g32 = g.to(kF32).contiguous(kCL), xc = x32.contiguous(kCL);
    const auto [dx1, dw1] = conv2d_backward(g32, xc, w32, x.shape(), q, true, true);
    EXPECT_TRUE(dx1.is_channels_last());  // (1 channel: NCHW too)
    const double tol_dx = 1e-5 * std::sqrt(static_cast<double>(w.size(0) * k.w[2] * k.w[3]));
    const double tol_dw = 1e-5 * std::sqrt(static_cast<double>(g.numel() / g.size(1)));
    EXPECT_LE(max_abs_diff(dx1.to(kF64), dx), tol_dx);
    EXPECT_LE(max_abs_diff(dw1.to(kF64), dw), tol_dw);
    // The passes alone, as the zero-bubble schedules call them.
    const Tensor dx_alone = conv2d_backward_input(g32, w32, x.shape(), q);
    EXPECT_TRUE(dx_alone.is_channels_last());
    EXPECT_LE(max_abs_diff(dx_alone.to(kF64), dx), tol_dx);
    EXPECT_LE(max_abs_diff(conv2d_backward_weight(g32, xc, w.shape(), q).to(kF64), dw), tol_dw);
  }
}

TEST(ChannelsLast, Bf16ConvolutionsOnOneDnnGiveNhwcBitForBit) {
  if (!backend(Device::cpu()).channels_last(ChannelsLastKernel::kConv2d, kBF16)) {
    GTEST_SKIP() << "this CPU runs bf16 convolutions on widened copies (no AVX-512 BF16), in NCHW";
  }
  // The NCHW side's activations go through tessera's NCHW <-> NHWC transposes (transpose16.h):
  // whole 32 x 16 tiles and the edges of both, here with 48 and 40 channels on 13x11. Where
  // the bf16 primitives prefer NHWC (AMX), its results are NHWC too, so the layers after it and
  // the next convolution need no transpose; with set_allow_preferred_layout(false) they stay
  // NCHW, transposed back inside the convolution.
  const bool kernels_prefer =
      backend(Device::cpu()).prefers_channels_last(ChannelsLastKernel::kConv2d, kBF16);
  const bool allowed = allow_preferred_layout();
  const char* setting = std::getenv("TESSERA_PREFERRED_LAYOUT");
  EXPECT_EQ(allowed, setting == nullptr || std::string(setting) != "off");
  for (bool allow : {true, false}) {
    set_allow_preferred_layout(allow);
    const bool prefers = kernels_prefer && allow;
    for (const auto& [xs, ws] : {std::pair<Shape, Shape>{{2, 16, 9, 10}, {32, 16, 3, 3}},
                                 std::pair<Shape, Shape>{{1, 48, 13, 11}, {40, 48, 3, 3}}}) {
      for (int64_t stride : {1, 2}) {
        Conv2dParams p, q;
        p.stride = q.stride = {stride, stride};
        p.padding = q.padding = {1, 1};
        q.channels_last = true;
        const Tensor x = seeded(xs, 50, kBF16), w = seeded(ws, 51, kBF16);
        const Tensor y0 = conv2d(x, w, Tensor(), p), y1 = conv2d(x, w, Tensor(), q);
        EXPECT_TRUE(nhwc(y1));
        EXPECT_EQ(nhwc(y0), prefers);
        EXPECT_EQ(max_abs_diff(y1, y0), 0.0);
        const Tensor g = seeded(y0.shape(), 52, kBF16);
        const auto [dx0, dw0] = conv2d_backward(g, x, w, x.shape(), p, true, true);
        EXPECT_EQ(nhwc(dx0), prefers);
        const auto [dx1, dw1] = conv2d_backward(g.contiguous(MemoryFormat::kChannelsLast),
                                                x.contiguous(MemoryFormat::kChannelsLast), w,
                                                x.shape(), q, true, true);
        EXPECT_TRUE(nhwc(dx1));
        EXPECT_EQ(max_abs_diff(dx1, dx0), 0.0);
        // At stride 2 the NHWC weight gradient runs as a matmul (conv_nhwc_matmul.h), its sums
        // in another order than the NCHW side's primitive (when that side is NCHW): within one
        // bf16 rounding, 2^-7 relative.
        const auto same_weight_grad = [&](const Tensor& dw) {
          if (stride == 1 || prefers) {
            EXPECT_EQ(max_abs_diff(dw, dw0), 0.0);
            return;
          }
          const Tensor dw64 = dw0.to(kF64);
          const Tensor err = sub(abs(sub(dw.to(kF64), dw64)), mul(abs(dw64), 1.0 / 128));
          EXPECT_LE(amax(err).item(), 0.0);
        };
        same_weight_grad(dw1);
        // The passes alone, as the zero-bubble schedules call them.
        const Tensor dx_alone = conv2d_backward_input(g.contiguous(kCL), w, x.shape(), q);
        EXPECT_TRUE(nhwc(dx_alone));
        EXPECT_EQ(max_abs_diff(dx_alone, dx0), 0.0);
        same_weight_grad(conv2d_backward_weight(g, x.contiguous(kCL), w.shape(), q));
      }
    }
  }
  set_allow_preferred_layout(allowed);
}

// bf16 convolutions on channels-last activations run some backward passes as matmuls
// (tensor/cpu/conv_nhwc_matmul.h: 1x1 layers both, strided layers and small maps their weight
// gradient through an NHWC im2col). Held to f64 on the same bf16 values, each result within one
// bf16 rounding (2^-8 relative) plus the f32 sums' error. 1x1: stride 1, 2 on odd maps (the
// sampled positions, and exact zeros in the input gradient everywhere else), 3 and (2, 1), one
// channel, 1x1 maps. 3x3 with padding: stride 2 on an odd map, stride 1 on 7x5 (at most 64
// outputs), dilation 2, stride (2, 1) with padding (1, 0), and 16 channels on 9x9 at stride 1
// (the primitive's side of the rule). x is NHWC with a storage offset. Where bf16 is not native
// the convolutions widen to f32 and the same bounds hold.
TEST(ChannelsLast, Bf16BackwardPassesAsMatmulsAreHeldToF64) {
  struct Case {
    Shape x;
    int64_t k, kernel;
    std::array<int64_t, 2> stride, pad;
    int64_t dilation;
  };
  for (const Case& c : {Case{{2, 48, 5, 7}, 40, 1, {1, 1}, {0, 0}, 1},
                        Case{{2, 40, 9, 11}, 24, 1, {2, 2}, {0, 0}, 1},
                        Case{{3, 1, 6, 5}, 16, 1, {1, 1}, {0, 0}, 1},
                        Case{{2, 32, 1, 1}, 48, 1, {1, 1}, {0, 0}, 1},
                        Case{{1, 64, 7, 7}, 32, 1, {3, 3}, {0, 0}, 1},
                        Case{{2, 24, 7, 9}, 16, 1, {2, 1}, {0, 0}, 1},
                        Case{{2, 32, 9, 11}, 24, 3, {2, 2}, {1, 1}, 1},
                        Case{{2, 48, 7, 5}, 32, 3, {1, 1}, {1, 1}, 1},
                        Case{{1, 16, 8, 8}, 16, 3, {1, 1}, {2, 2}, 2},
                        Case{{2, 32, 7, 9}, 24, 3, {2, 1}, {1, 0}, 1},
                        Case{{1, 16, 9, 9}, 32, 3, {1, 1}, {1, 1}, 1}}) {
    Conv2dParams p;
    p.stride = c.stride;
    p.padding = c.pad;
    p.dilation = {c.dilation, c.dilation};
    p.channels_last = true;
    // x is one image of a channels-last batch after the first: NHWC with a storage offset.
    const Tensor batch = seeded({c.x[0] + 1, c.x[1], c.x[2], c.x[3]}, 70, kBF16).contiguous(kCL);
    const Tensor x = batch.slice(0, 1, c.x[0] + 1);
    const Tensor w = seeded({c.k, c.x[1], c.kernel, c.kernel}, 71, kBF16);
    const auto out_size = [&](int64_t in, int d) {
      return (in + 2 * c.pad[d] - c.dilation * (c.kernel - 1) - 1) / c.stride[d] + 1;
    };
    const Tensor g = seeded({c.x[0], c.k, out_size(c.x[2], 0), out_size(c.x[3], 1)}, 72, kBF16);
    const Tensor x64 = x.to(kF64), w64 = w.to(kF64), g64 = g.to(kF64);
    Conv2dParams p64 = p;
    p64.channels_last = false;
    const auto [dx_ref, dw_ref] = conv2d_backward(g64, x64, w64, c.x, p64, true, true);
    // |got - want| <= 2^-8 |want| + 1e-5 (the f32 sums of up to a few thousand products of
    // values near 1 are good to about 1e-5, far below bf16's rounding).
    const auto within = [](const Tensor& got, const Tensor& want, const char* what) {
      const Tensor err = sub(abs(sub(got.to(kF64), want)), add(mul(abs(want), 1.0 / 256), 1e-5));
      EXPECT_LE(amax(err).item(), 0.0) << what;
    };
    const Tensor xc = x.contiguous(kCL), gc = g.contiguous(kCL);
    const auto [dx, dw] = conv2d_backward(gc, xc, w, c.x, p, true, true);
    within(dx, dx_ref, "input gradient, both passes");
    within(dw, dw_ref, "weight gradient, both passes");
    within(conv2d_backward_input(gc, w, c.x, p), dx_ref, "input gradient alone");
    within(conv2d_backward_weight(gc, xc, w.shape(), p), dw_ref, "weight gradient alone");
    if (c.kernel == 1 && c.stride != std::array<int64_t, 2>{1, 1}) {
      // Positions no output reads get exact zeros.
      Tensor unread = ones(c.x, kF64);
      unread.slice(2, 0, c.x[2], c.stride[0]).slice(3, 0, c.x[3], c.stride[1]).zero_();
      EXPECT_EQ(amax(abs(mul(dx.to(kF64), unread))).item(), 0.0);
      EXPECT_GT(amax(abs(dx.to(kF64))).item(), 0.0);
    }
  }
}

// An empty batch: no positions to sum over, so zero weight gradients (the matmul passes leave
// empty tensors to the primitives), and no crash.
TEST(ChannelsLast, Bf16EmptyBatchGivesZeroWeightGradients) {
  Conv2dParams p;
  p.channels_last = true;
  p.stride = {2, 2};
  for (int64_t kernel : {1, 3}) {
    p.padding = {kernel / 2, kernel / 2};
    const Tensor x = empty({0, 32, 7, 7}, kBF16, kCL);
    const Tensor w = ones({16, 32, kernel, kernel}, kBF16);
    const Tensor y = conv2d(x, w, Tensor(), p);
    EXPECT_EQ(y.shape(), (Shape{0, 16, 4, 4}));
    const auto [dx, dw] = conv2d_backward(empty(y.shape(), kBF16, kCL), x, w, x.shape(), p, true,
                                          true);
    EXPECT_EQ(dx.numel(), 0);
    EXPECT_EQ(amax(abs(dw.to(kF64))).item(), 0.0) << "kernel " << kernel;
  }
}

}  // namespace
}  // namespace tessera
