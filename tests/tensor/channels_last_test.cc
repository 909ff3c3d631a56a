// Channels-last tensors (tensor.h's MemoryFormat): the layout itself, and every op with
// channels-last kernels but the convolutions (channels_last_conv_test.cc) against the same op on
// contiguous NCHW copies of its operands:
//   - batch norm and batch norm + ReLU (+ residual), forward and backward, training and eval:
//     the same formulas with the sums in another order, so f64 agrees to 1e-12 and f32/bf16 to
//     rounding; shapes with odd sizes, more channels than a 256-channel segment and more
//     pixels than a 256-row block;
//   - max pooling: the same outputs, indices and input gradients bit for bit (NaNs, padding,
//     strides, overlapping windows), and gradients with exact zeros over reused memory;
//   - elementwise ops on NHWC operands give NHWC results with the same values;
//   - 16-bit copies between NCHW and NHWC (tiled transposes) move every value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tests/tensor/channels_last_util.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace {

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

}  // namespace
}  // namespace tessera
