// bf16 and f16 on the CPU against the per-element reference, Eigen::bfloat16 / Eigen::half.
// The kernels widen and round half runs a block at a time by bit operations
// (tensor/cpu/bf16_block.h, f16_block.h). Checked for both types: every one of the 65,536
// values widened; f32 values rounded (ties to even, overflow, subnormals, NaNs, infinities) and
// a sweep of 4.3 million f32 bit patterns across the whole range; elementwise and matmul results
// equal to the f32 computation on the same (exactly widened) values rounded once, bit for bit;
// batch norm within one rounding (its sums may add in another order). NaNs compare as NaNs of
// the same sign (Eigen's F16C conversion, under -march=native, keeps a NaN's payload). The file
// also runs with TESSERA_ONEDNN=off (BUILD), so bf16 takes tessera's kernels on a CPU that has
// AVX-512 BF16 too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "tensor/accelerator.h"
#include "tensor/half.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

template <typename T>
uint16_t bits_of(T h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

template <typename T>
bool is_nan_value(T h) {
  return std::isnan(static_cast<float>(h));
}

template <typename T>
void expect_same_bits(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.dtype(), DTypeOf<T>::value);
  ASSERT_EQ(want.dtype(), DTypeOf<T>::value);
  ASSERT_EQ(got.numel(), want.numel());
  const Tensor g = got.contiguous(), w = want.contiguous();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const T a = g.data<T>()[i], b = w.data<T>()[i];
    if (is_nan_value(b)) {
      ASSERT_TRUE(is_nan_value(a) && std::signbit(static_cast<float>(a)) ==
                                         std::signbit(static_cast<float>(b)))
          << what << ": element " << i << " is " << static_cast<float>(a) << ", expected a NaN";
    } else {
      ASSERT_EQ(bits_of(a), bits_of(b)) << what << ": element " << i << " is "
                                        << static_cast<float>(a) << ", expected "
                                        << static_cast<float>(b);
    }
  }
}

// Each element rounded by Eigen, one at a time: the reference.
template <typename T>
Tensor round_each(const Tensor& f32) {
  Tensor out = empty(f32.shape(), DTypeOf<T>::value);
  const Tensor c = f32.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.data<T>()[i] = T(c.data<float>()[i]);
  return out;
}

// Values that round in interesting ways in either type (ties, overflow, subnormals, NaNs),
// then a spread of ordinary ones; 1000 in all, so runs span several blocks.
Tensor tricky_f32() {
  std::vector<float> v = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256,    // bf16 ties
                          1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,  // f16 ties
                          65519.99f, 65520.0f, -65520.0f,          // f16's top
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::ldexp(3.0f, -25), std::ldexp(1.0f, -25),  // f16 subnormal ties
                          std::ldexp(1023.5f, -24),  // an f16 tie below 2^-14: up to it
                          std::numeric_limits<float>::denorm_min(), -1e-40f, 0.0f, -0.0f};
  Generator g(3);
  const std::vector<float> spread = mul(randn({1000 - static_cast<int64_t>(v.size())}, kF32, &g), 7.0)
                                        .to_vector<float>();
  v.insert(v.end(), spread.begin(), spread.end());
  return from_vector<float>(v, {static_cast<int64_t>(v.size())});
}

template <typename T>
class HalfOps : public ::testing::Test {
 protected:
  static constexpr DType kType = DTypeOf<T>::value;
  // One unit in the last place, relative: 2^-7 for bf16, 2^-10 for f16.
  static double ulp() { return kType == kBF16 ? 1.0 / 128 : 1.0 / 1024; }
};
using HalfTypes = ::testing::Types<BFloat16, Half>;
TYPED_TEST_SUITE(HalfOps, HalfTypes);

TYPED_TEST(HalfOps, EveryValueWidensExactly) {
  using T = TypeParam;
  Tensor all = empty({65536}, TestFixture::kType);
  uint16_t* p = static_cast<uint16_t*>(all.raw_data());
  for (int i = 0; i < 65536; ++i) p[i] = static_cast<uint16_t>(i);
  const Tensor wide = all.to(kF32);
  for (int i = 0; i < 65536; ++i) {
    const float want = static_cast<float>(all.data<T>()[i]);
    const float got = wide.data<float>()[i];
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got) && std::signbit(got) == std::signbit(want)) << "bits " << i;
    } else {
      uint32_t g, w;
      std::memcpy(&g, &got, 4);
      std::memcpy(&w, &want, 4);
      ASSERT_EQ(g, w) << "bits " << i;
    }
  }
}

TYPED_TEST(HalfOps, RoundingMatchesEigenIncludingTiesOverflowAndSubnormals) {
  using T = TypeParam;
  const Tensor x = tricky_f32();
  const Tensor h = x.to(TestFixture::kType);
  expect_same_bits<T>(h, round_each<T>(x), "f32 -> half");
  const auto at = [&](int i) { return static_cast<float>(h.data<T>()[i]); };
  if (TestFixture::kType == kBF16) {
    EXPECT_EQ(at(0), 1.0f);             // a tie: to even
    EXPECT_EQ(at(1), 1.0f + 4.0f / 256);  // a tie: up to even
  } else {
    EXPECT_EQ(at(2), 1.0f);
    EXPECT_EQ(at(3), 1.0f + 4.0f / 2048);
    EXPECT_EQ(at(4), 65504.0f);  // the largest f16
    EXPECT_TRUE(std::isinf(at(5)));
    EXPECT_EQ(at(12), std::ldexp(1.0f, -23));  // a subnormal tie: up to even
    EXPECT_EQ(at(13), 0.0f);                   // a tie with zero
  }
}

// Every 1009th f32 bit pattern: 4.3 million, all exponents, both signs.
TYPED_TEST(HalfOps, RoundingMatchesEigenAcrossTheF32Range) {
  using T = TypeParam;
  constexpr uint64_t kStride = 1009;
  const int64_t n = static_cast<int64_t>((uint64_t{1} << 32) / kStride);
  Tensor x = empty({n}, kF32);
  uint32_t* p = static_cast<uint32_t*>(x.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(static_cast<uint64_t>(i) * kStride);
  expect_same_bits<T>(x.to(TestFixture::kType), round_each<T>(x), "f32 bit patterns");
}

// Runs of every length from 1 to 40: the vector conversions' tails (fewer values than a
// vector) round and widen as Eigen does, element by element.
TYPED_TEST(HalfOps, ShortRunsConvertExactly) {
  using T = TypeParam;
  const DType dt = TestFixture::kType;
  Generator g(6);
  for (int64_t n = 1; n <= 40; ++n) {
    const Tensor x = mul(randn({n}, kF32, &g), 300.0);
    const Tensor h = x.to(dt);
    expect_same_bits<T>(h, round_each<T>(x), ("narrow, run of " + std::to_string(n)).c_str());
    const Tensor back = h.to(kF32);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(back.data<float>()[i], static_cast<float>(h.data<T>()[i])) << "widen, run of " << n;
    }
  }
}

TYPED_TEST(HalfOps, UnaryBinaryAndMatmulRoundOnceFromF32) {
  using T = TypeParam;
  const DType dt = TestFixture::kType;
  const Tensor x = tricky_f32().to(dt), xw = x.to(kF32);  // xw: exactly x's values in f32
  Generator g(4);
  const Tensor y = randn({1000}, kF32, &g).to(dt), yw = y.to(kF32);
  expect_same_bits<T>(relu(x), round_each<T>(relu(xw)), "relu");
  expect_same_bits<T>(neg(x), round_each<T>(neg(xw)), "neg");
  expect_same_bits<T>(add(x, y), round_each<T>(add(xw, yw)), "add");
  expect_same_bits<T>(mul(x, y), round_each<T>(mul(xw, yw)), "mul");
  expect_same_bits<T>(relu_backward(y, x), round_each<T>(relu_backward(yw, xw)), "relu_backward");
  // A scalar broadcast along the run, and a strided (non-contiguous) operand.
  const Tensor s = from_vector<float>({0.3f}, {1}).to(dt);
  expect_same_bits<T>(add(x, s), round_each<T>(add(xw, s.to(kF32))), "add scalar");
  const Tensor xt = x.view({25, 40}).transpose(0, 1), xtw = xw.view({25, 40}).transpose(0, 1);
  expect_same_bits<T>(relu(xt), round_each<T>(relu(xtw)), "relu of a transposed view");
  // A matmul: the f32 GEMM on the operands' exact values, rounded once (bf16 may go to oneDNN,
  // which accumulates in another order: compared within one rounding below instead).
  const Tensor a = randn({17, 33}, kF32, &g).to(dt), b = randn({33, 9}, kF32, &g).to(dt);
  const Tensor want = matmul(a.to(kF32), b.to(kF32));
  const Tensor bt = b.transpose(0, 1).contiguous().transpose(0, 1);  // a transposed operand
  for (const Tensor& got : {matmul(a, b), matmul(a, bt)}) {
    if (dt == kF16) {
      expect_same_bits<T>(got, round_each<T>(want), "matmul");
    } else {
      const Tensor diff = abs(sub(got.to(kF32), want));
      const Tensor tol = add(mul(abs(want), TestFixture::ulp()), 1e-3);
      EXPECT_EQ(sum(gt(diff, tol).to(kF32)).item(), 0.0) << "bf16 matmul";
    }
  }
}

// 3x3 convolutions of the shapes tessera's direct kernel takes (fewer than 128 channels, 8k
// outputs) read half-precision planes as they pad them and round each output row once: the f32
// kernel's result on the same (exactly widened) values, rounded once, bit for bit: forward,
// input gradient and weight gradient, each alone and the two gradients from one call, at
// strides 1 and 2 (the stride-2 input gradient still runs on widened copies); and 1x1
// convolutions' three passes on im2col + GEMM, widened a task's images at a time. bf16 where
// oneDNN computes it natively takes oneDNN's kernels, which sum in another order: compared
// within one rounding instead.
TYPED_TEST(HalfOps, ConvolutionsRoundOnceFromF32) {
  using T = TypeParam;
  const DType dt = TestFixture::kType;
  Generator g(5);
  const Tensor x = randn({2, 16, 11, 9}, kF32, &g).to(dt), w = randn({24, 16, 3, 3}, kF32, &g).to(dt);
  const Tensor b = randn({24}, kF32, &g).to(dt);
  auto expect_rounded_once = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    if (dt == kF16 || !computes_natively(Device(DeviceType::kCPU), kBF16)) {
      expect_same_bits<T>(got, round_each<T>(want), what.c_str());
    } else {
      const Tensor diff = abs(sub(got.to(kF32), want));
      const Tensor tol = add(mul(abs(want), TestFixture::ulp()), 1e-2);
      EXPECT_EQ(sum(gt(diff, tol).to(kF32)).item(), 0.0) << what;
    }
  };
  // Every pass, alone and jointly, of one convolution of x and w.
  auto check_passes = [&](const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                          const std::string& at) {
    const Tensor xw = x.to(kF32), ww = w.to(kF32), bw = b.to(kF32);
    expect_rounded_once(conv2d(x, w, b, p), conv2d(xw, ww, bw, p), "forward" + at);
    const Tensor dy = randn(conv2d(xw, ww, Tensor(), p).shape(), kF32, &g).to(dt);
    const Tensor dyw = dy.to(kF32);
    expect_rounded_once(conv2d_backward_input(dy, w, x.shape(), p),
                        conv2d_backward_input(dyw, ww, x.shape(), p), "input gradient" + at);
    expect_rounded_once(conv2d_backward_weight(dy, x, w.shape(), p),
                        conv2d_backward_weight(dyw, xw, w.shape(), p), "weight gradient" + at);
    const auto [dx, dw] = conv2d_backward(dy, x, w, x.shape(), p, true, true);
    const auto [dxw, dww] = conv2d_backward(dyw, xw, ww, x.shape(), p, true, true);
    expect_rounded_once(dx, dxw, "joint input gradient" + at);
    expect_rounded_once(dw, dww, "joint weight gradient" + at);
  };
  for (int64_t stride : {1, 2}) {
    Conv2dParams p;
    p.stride = {stride, stride};
    p.padding = {1, 1};
    check_passes(x, w, b, p, " at stride " + std::to_string(stride));
  }
  // 1x1 convolutions on im2col + GEMM: each pass widens a task's images at a time (several
  // images per task on small maps; one image, its own patch matrix, on large ones).
  for (const auto& [xs, ws, stride] :
       {std::tuple<Shape, Shape, int64_t>{{2, 16, 11, 9}, {24, 16, 1, 1}, 1},
        std::tuple<Shape, Shape, int64_t>{{3, 8, 17, 19}, {16, 8, 1, 1}, 1},
        std::tuple<Shape, Shape, int64_t>{{3, 8, 17, 19}, {16, 8, 1, 1}, 2}}) {
    Conv2dParams p;
    p.stride = {stride, stride};
    check_passes(randn(xs, kF32, &g).to(dt), randn(ws, kF32, &g).to(dt), b.narrow(0, 0, ws[0]), p,
                 ", 1x1 at stride " + std::to_string(stride));
  }
  // Shapes conv_path.h gives oneDNN's f32 primitives (unless TESSERA_CONV says otherwise), whose
  // reorders convert (channel_blocks.h): 128+ channels on small maps in whole blocks of 16 (one
  // pass each way, activations and weights), 136 input channels (widened, then oneDNN's
  // reorder), and the 7x7 stem's 3 channels (its input stays NCHW: widened only).
  for (const auto& [xs, ws, stride, pad] :
       {std::tuple<Shape, Shape, int64_t, int64_t>{{2, 128, 7, 5}, {128, 128, 3, 3}, 1, 1},
        std::tuple<Shape, Shape, int64_t, int64_t>{{2, 256, 6, 6}, {128, 256, 1, 1}, 1, 0},
        std::tuple<Shape, Shape, int64_t, int64_t>{{1, 136, 5, 7}, {128, 136, 1, 1}, 1, 0},
        std::tuple<Shape, Shape, int64_t, int64_t>{{2, 3, 20, 18}, {16, 3, 7, 7}, 2, 3},
        // Winograd's F(4x4, 3x3) (tensor/accelerator.h), with a bias, converted the same way.
        std::tuple<Shape, Shape, int64_t, int64_t>{{2, 32, 9, 10}, {48, 32, 3, 3}, 1, 1}}) {
    Conv2dParams p;
    p.stride = {stride, stride};
    p.padding = {pad, pad};
    const Tensor bias = randn({ws[0]}, kF32, &g).to(dt);
    check_passes(randn(xs, kF32, &g).to(dt), mul(randn(ws, kF32, &g), 0.1).to(dt), bias, p,
                 ", " + std::to_string(ws[1]) + "->" + std::to_string(ws[0]) + " kernel " +
                     std::to_string(ws[2]));
  }
}

// Batch norm on half input computes in f32 (statistics, normalization) and rounds its output
// once: within one rounding of the f32 computation on the same values.
TYPED_TEST(HalfOps, BatchNormComputesInF32) {
  const DType dt = TestFixture::kType;
  const double ulp = TestFixture::ulp();
  Generator g(5);
  const Tensor xf = add(mul(randn({6, 4, 9, 31}, kF32, &g), 3.0), 1.5);
  const Tensor x = xf.to(dt), xw = x.to(kF32);
  const Tensor w = randn({4}, kF32, &g), b = randn({4}, kF32, &g);
  Tensor rm = zeros({4}), rv = ones({4}), rm32 = zeros({4}), rv32 = ones({4});
  const BatchNormResult low = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  const BatchNormResult ref = batch_norm(xw, w, b, rm32, rv32, true, 0.1, 1e-5);
  ASSERT_EQ(low.output.dtype(), dt);
  EXPECT_LT(max_abs_diff(low.mean, ref.mean), 1e-5);
  EXPECT_LT(max_abs_diff(low.invstd, ref.invstd), 1e-5);
  const Tensor diff = abs(sub(low.output.to(kF32), ref.output));
  EXPECT_EQ(sum(gt(diff, add(mul(abs(ref.output), ulp), 1e-6)).to(kF32)).item(), 0.0);

  const Tensor grad = randn({6, 4, 9, 31}, kF32, &g).to(dt);
  const BatchNormGrads gl = batch_norm_backward(grad, x, w, low.mean, low.invstd, true, true, true);
  const BatchNormGrads gr = batch_norm_backward(grad.to(kF32), xw, w, ref.mean, ref.invstd, true, true, true);
  ASSERT_EQ(gl.input.dtype(), dt);
  EXPECT_LT(max_abs_diff(gl.weight, gr.weight), 1e-3);
  EXPECT_LT(max_abs_diff(gl.bias, gr.bias), 1e-3);
  const Tensor gdiff = abs(sub(gl.input.to(kF32), gr.input));
  EXPECT_EQ(sum(gt(gdiff, add(mul(abs(gr.input), 2 * ulp), 1e-4)).to(kF32)).item(), 0.0);
}

// Max pooling on half input picks among its inputs, so it equals f32 pooling of the same values
// exactly (indices too, ties keeping the first, a NaN window giving a NaN); its backward sums
// each input's gradients in f32 and rounds once: the f32 backward rounded, bit for bit.
TYPED_TEST(HalfOps, MaxPoolIsExactAndItsBackwardRoundsOnce) {
  using T = TypeParam;
  const DType dt = TestFixture::kType;
  Generator g(6);
  // Few distinct values make ties common; one NaN and one infinity.
  Tensor xf = empty({2, 3, 11, 13}, kF32);
  for (int64_t i = 0; i < xf.numel(); ++i) xf.data<float>()[i] = 0.5f * ((i * 7919) % 9) - 2.0f;
  xf.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  xf.data<float>()[200] = std::numeric_limits<float>::infinity();
  const Tensor x = xf.to(dt), xw = x.to(kF32);
  for (const auto& [k, s, pad] : {std::tuple<int64_t, int64_t, int64_t>{3, 2, 1}, {2, 1, 0},
                                  {3, 1, 1}}) {
    Pool2dParams p;
    p.kernel = {k, k};
    p.stride = {s, s};
    p.padding = {pad, pad};
    const std::string what = "max_pool2d " + std::to_string(k) + "/" + std::to_string(s);
    const auto [y, idx] = max_pool2d_with_indices(x, p);
    const auto [yw, idxw] = max_pool2d_with_indices(xw, p);
    expect_same_bits<T>(y, round_each<T>(yw), what.c_str());
    EXPECT_EQ(max_abs_diff(idx.to(kF64), idxw.to(kF64)), 0.0) << what;
    const Tensor dy = randn(y.shape(), kF32, &g).to(dt);
    expect_same_bits<T>(max_pool2d_backward(dy, idx, x.shape()),
                        round_each<T>(max_pool2d_backward(dy.to(kF32), idxw, x.shape())),
                        (what + " backward").c_str());
  }
}

// No CPU here multiplies f16 natively (fp16 autocast widens to f32): the advice says so and
// names what to choose; bf16 is native exactly where oneDNN runs it (AVX-512 BF16 or AMX, as
// the CPU's flags say), and then has no advice.
TEST(LowPrecisionAdvice, NamesWhatTheCpuComputesNatively) {
  const Device cpu = Device::cpu();
  EXPECT_FALSE(computes_natively(cpu, kF16));
  const std::string f16 = low_precision_advice(cpu, kF16);
  EXPECT_NE(f16.find("fp16 autocast on cpu"), std::string::npos) << f16;
  EXPECT_NE(f16.find(computes_natively(cpu, kBF16) ? "choose it" : "choose f32"),
            std::string::npos)
      << f16;
  EXPECT_EQ(low_precision_advice(cpu, kBF16).empty(), computes_natively(cpu, kBF16));
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)),
                          std::istreambuf_iterator<char>());
  const bool has_bf16 = flags.find("avx512_bf16") != std::string::npos ||
                        flags.find("amx_bf16") != std::string::npos;
  // TESSERA_ONEDNN=off (one of this file's runs) keeps bf16 on widened copies whatever the CPU.
  const char* onednn = std::getenv("TESSERA_ONEDNN");
  const bool onednn_off = onednn != nullptr && std::string(onednn) == "off";
  if (!flags.empty() && !onednn_off) {
    EXPECT_EQ(computes_natively(cpu, kBF16), has_bf16);
  }
  try {
    computes_natively(cpu, kF32);
    ADD_FAILURE() << "f32 is not a low precision";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("got f32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
