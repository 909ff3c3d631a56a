// Channels-last tensors (tensor.h's MemoryFormat): the layout itself, and every op with
// channels-last kernels against the same op on contiguous NCHW copies of its operands:
//   - batch norm and batch norm + ReLU (+ residual), forward and backward, training and eval:
//     the same formulas with the sums in another order, so f64 agrees to 1e-12 and f32/bf16 to
//     rounding; shapes with odd sizes, more channels than a 256-channel segment and more
//     pixels than a 256-row block;
//   - max pooling: the same outputs, indices and input gradients bit for bit (NaNs, padding,
//     strides, overlapping windows), and gradients with exact zeros over reused memory;
//   - elementwise ops on NHWC operands give NHWC results with the same values;
//   - convolutions keep NCHW where the backend has no channels-last kernel for the dtype; f32
//     ones (oneDNN on NHWC) give NHWC results held to f64's; bf16 ones on oneDNN give NHWC
//     results equal bit for bit to the NCHW path's (weight gradients that run as matmuls on
//     NHWC, tensor/cpu/conv_nhwc_matmul.h, within one bf16 rounding), and NHWC results from
//     NCHW inputs too where their kernels prefer that layout (Backend::prefers_channels_last:
//     AMX); those matmul passes are held to f64;
//   - 16-bit copies between NCHW and NHWC (tiled transposes) move every value.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "tensor/accelerator.h"
#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace {

constexpr MemoryFormat kCL = MemoryFormat::kChannelsLast;

bool nhwc(const Tensor& t) { return t.is_channels_last() && !t.is_contiguous(); }

Tensor seeded(const Shape& shape, uint64_t seed, DType dtype = kF64) {
  Generator g(seed);
  return randn(shape, kF64, &g).to(dtype);
}

TEST(ChannelsLast, LayoutAndConversions) {
  const Tensor x = seeded({2, 3, 4, 5}, 1);
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_FALSE(x.is_channels_last());
  const Tensor y = x.contiguous(kCL);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(y.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(y.is_channels_last());
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_TRUE(y.contiguous(kCL).is_same(y));
  EXPECT_EQ(max_abs_diff(y, x), 0.0);
  EXPECT_EQ(max_abs_diff(y.contiguous(), x), 0.0);
  // The storage really is NHWC: element (n, c, h, w) at ((n * H + h) * W + w) * C + c.
  const double* p = y.data<double>();
  EXPECT_EQ(p[((1 * 4 + 2) * 5 + 3) * 3 + 2], x.at({1, 2, 2, 3}));
  const Tensor e = empty({2, 3, 4, 5}, kF32, kCL);
  EXPECT_TRUE(e.is_channels_last());
  EXPECT_EQ(e.dtype(), kF32);
  // One channel, or 1x1 planes: both layouts are the same bytes, and the tensor is both.
  EXPECT_TRUE(seeded({2, 1, 4, 5}, 2).is_channels_last());
  EXPECT_TRUE(seeded({2, 3, 1, 1}, 2).is_channels_last());
  EXPECT_THROW(seeded({2, 3, 4}, 3).contiguous(kCL), Error);
  // view cannot flatten NHWC storage in NCHW order, and says the tensor is channels-last.
  try {
    (void)y.view({2, 60});
    ADD_FAILURE() << "view of a channels-last tensor to [2, 60] did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channels-last (NHWC)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(max_abs_diff(y.reshape({2, 60}), x.reshape({2, 60})), 0.0);
  EXPECT_THROW(empty({2, 3}, kF32, kCL), Error);
}

// batch_norm / batch_norm_relu on NHWC operands against the same on NCHW ones.
void expect_batch_norm_matches(const Shape& shape, DType dtype, double tol) {
  const int64_t c = shape[1];
  const Tensor x = seeded(shape, 10, dtype), res = seeded(shape, 11, dtype);
  const Tensor g = seeded(shape, 12, dtype);
  const Tensor w = add(seeded({c}, 13, kF32), 1.0), b = seeded({c}, 14, kF32);
  for (bool training : {true, false}) {
    for (int kind = 0; kind < 3; ++kind) {  // batch norm, + ReLU, + residual + ReLU
      SCOPED_TRACE(::testing::Message() << shape_str(shape) << " " << dtype << " training " << training
                                      << " kind " << kind);
      Tensor rm[2], rv[2];
      for (int k = 0; k < 2; ++k) {
        rm[k] = seeded({c}, 15, kF32);
        rv[k] = add(abs(seeded({c}, 16, kF32)), 0.5);
      }
      BatchNormResult out[2];
      Tensor dx[2], dw[2], db[2], dres[2];
      for (int k = 0; k < 2; ++k) {
        const auto lay = [&](const Tensor& t) { return k ? t.contiguous(kCL) : t; };
        if (kind == 0) {
          out[k] = batch_norm(lay(x), w, b, rm[k], rv[k], training, 0.1, 1e-5);
          const BatchNormGrads d = batch_norm_backward(lay(g), lay(x), w, out[k].mean,
                                                       out[k].invstd, training, true, true);
          dx[k] = d.input, dw[k] = d.weight, db[k] = d.bias;
        } else {
          const Tensor r = kind == 2 ? lay(res) : Tensor();
          out[k] = batch_norm_relu(lay(x), w, b, r, rm[k], rv[k], training, 0.1, 1e-5);
          const BatchNormReluGrads d =
              batch_norm_relu_backward(lay(g), out[k].output, lay(x), w, out[k].mean,
                                       out[k].invstd, training, true, true, kind == 2);
          dx[k] = d.input, dw[k] = d.weight, db[k] = d.bias, dres[k] = d.residual;
        }
      }
      // (1x1 planes: NHWC and NCHW are the same bytes, and the results both.)
      EXPECT_TRUE(out[1].output.is_channels_last());
      EXPECT_TRUE(dx[1].is_channels_last());
      EXPECT_LE(max_abs_diff(out[1].output, out[0].output), tol);
      EXPECT_LE(max_abs_diff(out[1].mean, out[0].mean), tol);
      EXPECT_LE(max_abs_diff(out[1].invstd, out[0].invstd), tol);
      EXPECT_LE(max_abs_diff(rm[1], rm[0]), tol);
      EXPECT_LE(max_abs_diff(rv[1], rv[0]), tol);
      EXPECT_LE(max_abs_diff(dx[1], dx[0]), tol);
      EXPECT_LE(max_abs_diff(dw[1], dw[0]), tol * shape[0] * shape[2] * shape[3]);
      EXPECT_LE(max_abs_diff(db[1], db[0]), tol * shape[0] * shape[2] * shape[3]);
      if (kind == 2) {
        EXPECT_TRUE(dres[1].is_channels_last());
        EXPECT_EQ(max_abs_diff(dres[1], dres[0]), 0.0);  // the masked gradient: no arithmetic
      }
    }
  }
}

TEST(ChannelsLast, BatchNormMatchesNchw) {
  for (const Shape& shape : {Shape{2, 3, 5, 7}, Shape{1, 300, 3, 3}, Shape{3, 17, 13, 11},
                             Shape{2, 5, 1, 1}}) {
    expect_batch_norm_matches(shape, kF64, 1e-12);
    expect_batch_norm_matches(shape, kF32, 2e-5);
  }
  // bf16: both round the same f32 values once, which may differ by the sums' order.
  expect_batch_norm_matches({2, 19, 6, 5}, kBF16, 0.07);
}

TEST(ChannelsLast, MaxPoolIsTheNchwPoolBitForBit) {
  for (DType dtype : {kF32, kF64, kBF16, kF16}) {
    for (const Pool2dParams& p :
         {Pool2dParams{{3, 3}, {2, 2}, {1, 1}}, Pool2dParams{{2, 2}, {2, 2}, {0, 0}},
          Pool2dParams{{3, 2}, {1, 2}, {1, 1}}, Pool2dParams{{2, 3}, {2, 1}, {0, 1}},
          Pool2dParams{{3, 3}, {3, 3}, {1, 1}}}) {
      SCOPED_TRACE(::testing::Message() << dtype << " kernel " << p.kernel[0] << "x" << p.kernel[1]);
      Tensor x = seeded({2, 5, 9, 8}, 20);
      // Ties and NaNs: the first maximum (or first NaN) of a window wins in both layouts.
      x.narrow(3, 0, 2).fill_(1.5);
      Tensor(x.select(0, 1).select(0, 2).select(0, 4)).fill_(std::nan(""));
      x = x.to(dtype);
      const auto [y0, i0] = max_pool2d_with_indices(x, p);
      const auto [y1, i1] = max_pool2d_with_indices(x.contiguous(kCL), p);
      EXPECT_TRUE(nhwc(y1));
      EXPECT_TRUE(nhwc(i1));
      EXPECT_EQ(i1.contiguous().to_vector<int64_t>(), i0.to_vector<int64_t>());
      const std::vector<double> a = y0.to(kF64).to_vector<double>();
      const std::vector<double> b = y1.contiguous().to(kF64).to_vector<double>();
      for (size_t k = 0; k < a.size(); ++k) {
        ASSERT_TRUE(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k]))) << k;
      }
      const Tensor g = seeded(y0.shape(), 21, dtype);
      const Tensor d0 = max_pool2d_backward(g, i0, x.shape());
      const Tensor d1 = max_pool2d_backward(g.contiguous(kCL), i1, x.shape());
      EXPECT_TRUE(nhwc(d1));
      EXPECT_EQ(max_abs_diff(d1, d0), 0.0);
    }
  }
}

// The backward writes every element of its input gradient itself (the backend contract): run on
// memory a NaN-filled tensor of the same size just gave back to the allocator's cache, it gives
// exact zeros where no window took the input, and elsewhere the sums of the windows' gradients,
// added here from the indices in f64. 3x3 windows at stride 2 overlap, so inputs take up to
// four sums, and a quarter of them none.
TEST(ChannelsLast, MaxPoolBackwardZeroesInputsNoWindowTookOverReusedMemory) {
  const Shape shape{8, 32, 33, 65};  // 1.1 MB in bf16: freed blocks of 1 MiB up are reused
  const Pool2dParams p{{3, 3}, {2, 2}, {1, 1}};
  for (DType dtype : {kF32, kBF16}) {
    for (MemoryFormat format : {MemoryFormat::kContiguous, kCL}) {
      SCOPED_TRACE(::testing::Message() << dtype << (format == kCL ? " channels-last" : " NCHW"));
      const Tensor x = seeded(shape, 40, dtype).contiguous(format);
      const auto [y, indices] = max_pool2d_with_indices(x, p);
      const Tensor g = seeded(y.shape(), 41, dtype).contiguous(format);
      const std::vector<int64_t> at = indices.contiguous().to_vector<int64_t>();
      const std::vector<double> gv = g.contiguous().to(kF64).to_vector<double>();
      const int64_t planes = shape[0] * shape[1], in_plane = shape[2] * shape[3];
      const int64_t out_plane = y.size(2) * y.size(3);
      std::vector<double> want(planes * in_plane, 0.0);
      for (int64_t pl = 0; pl < planes; ++pl) {
        for (int64_t o = 0; o < out_plane; ++o) {
          want[pl * in_plane + at[pl * out_plane + o]] += gv[pl * out_plane + o];
        }
      }
      { Tensor(empty(shape, TensorOptions(dtype), format)).fill_(std::nan("")); }
      const std::vector<double> got =
          max_pool2d_backward(g, indices, shape).contiguous().to(kF64).to_vector<double>();
      ASSERT_EQ(got.size(), want.size());
      int64_t zeros = 0;
      const double tol = dtype == kBF16 ? 1e-2 : 1e-6;
      for (size_t k = 0; k < want.size(); ++k) {
        if (want[k] == 0.0) {
          ++zeros;
          ASSERT_EQ(got[k], 0.0) << k;
        } else {
          ASSERT_NEAR(got[k], want[k], tol * (1 + std::abs(want[k]))) << k;
        }
      }
      EXPECT_GT(zeros, static_cast<int64_t>(want.size()) / 4);
    }
  }
}

// add_ and mul_ on a channels-last tensor write its own memory in place (autograd sums
// gradients with add_), with the values of the out-of-place ops, whatever b's layout.
TEST(ChannelsLast, InPlaceAddAndMulWriteTheChannelsLastTensorItself) {
  for (DType dtype : {kF32, kBF16}) {
    const Tensor a0 = seeded({2, 3, 4, 5}, 32, dtype), b = seeded({2, 3, 4, 5}, 33, dtype);
    for (const Tensor& bb : {b, b.contiguous(kCL)}) {
      Tensor a = a0.contiguous(kCL);
      const void* memory = a.raw_data();
      add_(a, bb);
      EXPECT_EQ(a.raw_data(), memory);
      EXPECT_TRUE(nhwc(a));
      EXPECT_EQ(max_abs_diff(a, add(a0, b)), 0.0);
      mul_(a, bb);
      EXPECT_EQ(a.raw_data(), memory);
      EXPECT_EQ(max_abs_diff(a, mul(add(a0, b), b)), 0.0);
    }
  }
}

TEST(ChannelsLast, ElementwiseKeepsTheLayout) {
  const Tensor a = seeded({2, 3, 4, 5}, 30), b = seeded({2, 3, 4, 5}, 31);
  const Tensor a1 = a.contiguous(kCL), b1 = b.contiguous(kCL);
  const Tensor sum = add(a1, b1), prod = mul(a1, b1), neg_a = neg(a1);
  EXPECT_TRUE(nhwc(sum));
  EXPECT_TRUE(nhwc(prod));
  EXPECT_TRUE(nhwc(neg_a));
  EXPECT_EQ(max_abs_diff(sum, add(a, b)), 0.0);
  EXPECT_EQ(max_abs_diff(prod, mul(a, b)), 0.0);
  EXPECT_EQ(max_abs_diff(neg_a, neg(a)), 0.0);
  // Mixed layouts and broadcasts take the strided path, contiguous result, same values.
  const Tensor mixed = add(a1, b);
  EXPECT_TRUE(mixed.is_contiguous());
  EXPECT_EQ(max_abs_diff(mixed, add(a, b)), 0.0);
  EXPECT_EQ(max_abs_diff(add(a1, seeded({1, 3, 1, 1}, 32)), add(a, seeded({1, 3, 1, 1}, 32))),
            0.0);
}

// Fills and copies walk their output in memory order (loops.h): for channels-last or
// transposed outputs that is not the logical order, and every element must still be written
// once, with its own value.
TEST(ChannelsLast, FillsAndCopiesWriteEveryElementInAnyLayout) {
  const Tensor a = seeded({2, 3, 4, 5}, 35);
  Tensor filled = empty({2, 3, 4, 5}, kF64, kCL);
  filled.fill_(2.5);
  EXPECT_EQ(max_abs_diff(filled, full({2, 3, 4, 5}, 2.5, kF64)), 0.0);
  // Copies from NCHW: with 3 channels along rows of 5 (row-major order), with 8 channels
  // along each pixel's channels (the output's memory order; loops.h, coalesce).
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{2, 8, 3, 2}}) {
    const Tensor src = seeded(shape, 37);
    Tensor copied = empty(shape, kF64, kCL);
    copied.copy_(src);
    EXPECT_TRUE(nhwc(copied));
    EXPECT_EQ(max_abs_diff(copied, src), 0.0);
    EXPECT_EQ(max_abs_diff(copied.contiguous(), src), 0.0);
  }
  // A transposed view as the output: its columns are written in memory order.
  Tensor m = zeros({6, 7}, kF64);
  Tensor mt = m.t();
  const Tensor src = seeded({7, 6}, 36);
  mt.copy_(src);
  EXPECT_EQ(max_abs_diff(m, src.t().contiguous()), 0.0);
  mt.fill_(-1.0);
  EXPECT_EQ(max_abs_diff(m, full({6, 7}, -1.0, kF64)), 0.0);
}

// bf16 and f16 copies between contiguous NCHW and channels-last run the tiled transposes of
// tensor/cpu/transpose16.h; the reference is the element-by-element conversion to f64 (another
// dtype, so another loop). Shapes: whole 32 x 16 tiles and both edges, 16 channels on 7x7, maps
// of one row, and one image of a batch (a storage offset) on either side.
TEST(ChannelsLast, SixteenBitCopiesBetweenLayoutsMoveEveryValue) {
  for (DType dtype : {kBF16, kF16}) {
    for (const Shape& shape : {Shape{2, 48, 13, 11}, Shape{3, 16, 7, 7}, Shape{1, 40, 5, 3},
                               Shape{2, 24, 1, 5}}) {
      const Tensor batch = seeded({3, shape[1], shape[2], shape[3]}, 38, dtype);
      for (const Tensor& x : {seeded(shape, 39, dtype), batch.slice(0, 1, 2)}) {
        const Tensor want = x.to(kF64);
        const Tensor cl = x.contiguous(kCL);
        EXPECT_TRUE(nhwc(cl));
        EXPECT_EQ(max_abs_diff(cl.to(kF64), want), 0.0) << dtype << " " << x.str();
        const Tensor back = cl.contiguous();
        EXPECT_TRUE(back.is_contiguous());
        EXPECT_EQ(max_abs_diff(back.to(kF64), want), 0.0) << dtype << " " << x.str();
      }
      // From one image of a channels-last batch (a storage offset on the NHWC side).
      const Tensor one = batch.contiguous(kCL).slice(0, 2, 3);
      EXPECT_TRUE(nhwc(one));
      EXPECT_EQ(max_abs_diff(one.contiguous().to(kF64), batch.slice(0, 2, 3).to(kF64)), 0.0);
    }
  }
}

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
