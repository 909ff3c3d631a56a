// The CPU's fast bf16 paths (tensor/cpu/bf16_block.h: widen and round by bit operations, a
// block at a time) against the per-element reference they replace, Eigen::bfloat16: every one
// of the 65,536 bf16 values widened, f32 values rounded (ties to even, NaN of either sign,
// infinities, the largest finite values, denormals), and unary, binary and batch-norm results
// bit for bit equal to computing in f32 and rounding each element once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/ops.h"

namespace tessera {
namespace {

uint16_t bits_of(BFloat16 b) {
  uint16_t u;
  std::memcpy(&u, &b, 2);
  return u;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Bit-exact equality of two bf16 tensors of the same shape; the first differing element named.
void expect_same_bits(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.dtype(), kBF16);
  ASSERT_EQ(want.dtype(), kBF16);
  ASSERT_EQ(got.numel(), want.numel());
  const Tensor g = got.contiguous(), w = want.contiguous();
  const BFloat16* pg = g.data<BFloat16>();
  const BFloat16* pw = w.data<BFloat16>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_EQ(bits_of(pg[i]), bits_of(pw[i]))
        << what << ": element " << i << " is " << static_cast<float>(pg[i]) << ", expected "
        << static_cast<float>(pw[i]);
  }
}

// f32 values that exercise rounding: ties both ways, NaNs, infinities, extremes, denormals,
// and a spread of ordinary values; 1000 of them so runs span several blocks.
Tensor tricky_f32() {
  std::vector<float> v = {1.0f + 1.0f / 256,  // a tie: rounds to even (1.0)
                          1.0f + 3.0f / 256,  // a tie: rounds up to even
                          -(1.0f + 1.0f / 256),
                          std::numeric_limits<float>::max(),  // rounds to inf
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          float_of(0x7F800001u),  // a signalling NaN
                          std::numeric_limits<float>::denorm_min(),
                          -1e-40f,
                          0.0f,
                          -0.0f};
  Generator g(3);
  const std::vector<float> spread = mul(randn({1000 - static_cast<int64_t>(v.size())}, kF32, &g), 7.0)
                                        .to_vector<float>();
  v.insert(v.end(), spread.begin(), spread.end());
  return from_vector<float>(v, {static_cast<int64_t>(v.size())});
}

// Each element rounded by Eigen::bfloat16, one at a time: the reference.
Tensor round_each(const Tensor& f32) {
  Tensor out = empty(f32.shape(), kBF16);
  const Tensor c = f32.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.data<BFloat16>()[i] = BFloat16(c.data<float>()[i]);
  return out;
}

TEST(Bf16, EveryBf16ValueWidensExactly) {
  Tensor all = empty({65536}, kBF16);
  uint16_t* p = static_cast<uint16_t*>(all.raw_data());
  for (int i = 0; i < 65536; ++i) p[i] = static_cast<uint16_t>(i);
  const Tensor wide = all.to(kF32);
  for (int i = 0; i < 65536; ++i) {
    const float want = static_cast<float>(all.data<BFloat16>()[i]);
    ASSERT_EQ(bits_of(wide.data<float>()[i]), bits_of(want)) << "bf16 bits " << i;
  }
}

TEST(Bf16, RoundingMatchesEigenIncludingTiesAndNaNs) {
  const Tensor x = tricky_f32();
  expect_same_bits(x.to(kBF16), round_each(x), "f32 -> bf16");
  EXPECT_EQ(static_cast<float>(x.to(kBF16).data<BFloat16>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(x.to(kBF16).data<BFloat16>()[1]), 1.0f + 4.0f / 256);
}

TEST(Bf16, UnaryAndBinaryOpsRoundOnceFromF32) {
  const Tensor xf = tricky_f32();
  const Tensor x = xf.to(kBF16), xw = x.to(kF32);  // xw: exactly x's values in f32
  Generator g(4);
  const Tensor y = randn({1000}, kF32, &g).to(kBF16), yw = y.to(kF32);
  expect_same_bits(relu(x), round_each(relu(xw)), "relu");
  expect_same_bits(neg(x), round_each(neg(xw)), "neg");
  expect_same_bits(add(x, y), round_each(add(xw, yw)), "add");
  expect_same_bits(mul(x, y), round_each(mul(xw, yw)), "mul");
  expect_same_bits(relu_backward(y, x), round_each(relu_backward(yw, xw)), "relu_backward");
  // A scalar broadcast along the run, and a strided (non-contiguous) operand.
  const Tensor s = from_vector<float>({0.3f}, {1}).to(kBF16);
  expect_same_bits(add(x, s), round_each(add(xw, s.to(kF32))), "add scalar");
  const Tensor xt = x.view({25, 40}).transpose(0, 1), xtw = xw.view({25, 40}).transpose(0, 1);
  expect_same_bits(relu(xt), round_each(relu(xtw)), "relu of a transposed view");
}

// Batch norm on bf16 input computes in f32 (statistics, normalization) and rounds its output
// once: within one bf16 rounding of the f32 computation on the same values (the statistics'
// sums may add in another order, so the last f32 bit may differ before rounding).
TEST(Bf16, BatchNormComputesInF32) {
  Generator g(5);
  const Tensor xf = add(mul(randn({6, 4, 9, 31}, kF32, &g), 3.0), 1.5);
  const Tensor x = xf.to(kBF16), xw = x.to(kF32);
  const Tensor w = randn({4}, kF32, &g), b = randn({4}, kF32, &g);
  Tensor rm = zeros({4}), rv = ones({4}), rm32 = zeros({4}), rv32 = ones({4});
  const BatchNormResult low = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  const BatchNormResult ref = batch_norm(xw, w, b, rm32, rv32, true, 0.1, 1e-5);
  ASSERT_EQ(low.output.dtype(), kBF16);
  EXPECT_LT(max_abs_diff(low.mean, ref.mean), 1e-5);
  EXPECT_LT(max_abs_diff(low.invstd, ref.invstd), 1e-5);
  const Tensor diff = abs(sub(low.output.to(kF32), ref.output));
  const Tensor ulp = add(mul(abs(ref.output), 1.0 / 128), 1e-6);  // one bf16 ulp
  EXPECT_EQ(sum(gt(diff, ulp).to(kF32)).item(), 0.0);

  const Tensor grad = randn({6, 4, 9, 31}, kF32, &g).to(kBF16);
  const BatchNormGrads gl = batch_norm_backward(grad, x, w, low.mean, low.invstd, true, true, true);
  const BatchNormGrads gr = batch_norm_backward(grad.to(kF32), xw, w, ref.mean, ref.invstd, true, true, true);
  ASSERT_EQ(gl.input.dtype(), kBF16);
  EXPECT_LT(max_abs_diff(gl.weight, gr.weight), 1e-3);
  EXPECT_LT(max_abs_diff(gl.bias, gr.bias), 1e-3);
  const Tensor gdiff = abs(sub(gl.input.to(kF32), gr.input));
  const Tensor gulp = add(mul(abs(gr.input), 1.0 / 64), 1e-4);
  EXPECT_EQ(sum(gt(gdiff, gulp).to(kF32)).item(), 0.0);
}

}  // namespace
}  // namespace tessera
