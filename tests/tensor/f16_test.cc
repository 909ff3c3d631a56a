// The CPU's fast f16 paths (tensor/cpu/f16_block.h: branch-free widen and round, a block at a
// time) against the per-element reference they replace, Eigen::half: every one of the 65,536
// f16 values widened; f32 values rounded (ties to even, the overflow threshold 65520,
// subnormal boundaries, NaNs, infinities) and a sweep of 4.3 million f32 bit patterns across
// the whole range; and unary, binary, batch-norm and matmul results equal to computing in f32
// and rounding each element once. Built with -march=native, Eigen converts with the F16C
// instructions, which keep a NaN's payload where the software conversion writes 0x7E00: NaNs
// are compared as NaNs of the same sign.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/ops.h"

namespace tessera {
namespace {

uint16_t bits_of(Half h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
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
bool is_nan16(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }

// Equal bits, or NaNs of the same sign.
void expect_same_half(uint16_t got, uint16_t want, const std::string& what) {
  if (is_nan16(want)) {
    ASSERT_TRUE(is_nan16(got) && (got & 0x8000u) == (want & 0x8000u))
        << what << ": got 0x" << std::hex << got << ", expected a NaN like 0x" << want;
  } else {
    ASSERT_EQ(got, want) << what << ": got 0x" << std::hex << got << ", expected 0x" << want;
  }
}

void expect_same_bits(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.dtype(), kF16);
  ASSERT_EQ(want.dtype(), kF16);
  ASSERT_EQ(got.numel(), want.numel());
  const Tensor g = got.contiguous(), w = want.contiguous();
  for (int64_t i = 0; i < g.numel(); ++i) {
    expect_same_half(bits_of(g.data<Half>()[i]), bits_of(w.data<Half>()[i]),
                     std::string(what) + ", element " + std::to_string(i));
  }
}

// f32 values that exercise rounding, 1000 of them so runs span several blocks.
Tensor tricky_f32() {
  std::vector<float> v = {1.0f + 1.0f / 2048,  // a tie: rounds to even (1.0)
                          1.0f + 3.0f / 2048,  // a tie: rounds up to even (1 + 4/2048)
                          -(1.0f + 1.0f / 2048),
                          65504.0f,   // the largest f16
                          65519.99f,  // still rounds down to 65504
                          65520.0f,   // the tie at the top: rounds to infinity
                          -65520.0f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          float_of(0x7F800001u),      // a signalling NaN
                          std::ldexp(1.0f, -14),      // the smallest normal f16
                          std::ldexp(1.0f, -24),      // the smallest subnormal f16
                          std::ldexp(1.0f, -25),      // a tie with zero: rounds to 0
                          std::ldexp(3.0f, -25),      // a tie: rounds up to 2^-23
                          std::ldexp(1023.5f, -24),   // a tie below 2^-14: rounds up to it
                          -std::ldexp(5.0f, -20),
                          std::numeric_limits<float>::denorm_min(),
                          0.0f,
                          -0.0f};
  Generator g(3);
  const std::vector<float> spread = mul(randn({1000 - static_cast<int64_t>(v.size())}, kF32, &g), 7.0)
                                        .to_vector<float>();
  v.insert(v.end(), spread.begin(), spread.end());
  return from_vector<float>(v, {static_cast<int64_t>(v.size())});
}

// Each element rounded by Eigen::half, one at a time: the reference.
Tensor round_each(const Tensor& f32) {
  Tensor out = empty(f32.shape(), kF16);
  const Tensor c = f32.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.data<Half>()[i] = Half(c.data<float>()[i]);
  return out;
}

TEST(F16, EveryF16ValueWidensExactly) {
  Tensor all = empty({65536}, kF16);
  uint16_t* p = static_cast<uint16_t*>(all.raw_data());
  for (int i = 0; i < 65536; ++i) p[i] = static_cast<uint16_t>(i);
  const Tensor wide = all.to(kF32);
  for (int i = 0; i < 65536; ++i) {
    const float want = static_cast<float>(all.data<Half>()[i]);
    const float got = wide.data<float>()[i];
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got) && std::signbit(got) == std::signbit(want)) << "f16 bits " << i;
    } else {
      ASSERT_EQ(bits_of(got), bits_of(want)) << "f16 bits " << i;
    }
  }
}

TEST(F16, RoundingMatchesEigenIncludingTiesOverflowAndSubnormals) {
  const Tensor x = tricky_f32();
  const Tensor h = x.to(kF16);
  expect_same_bits(h, round_each(x), "f32 -> f16");
  const Half* p = h.data<Half>();
  EXPECT_EQ(static_cast<float>(p[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(p[1]), 1.0f + 4.0f / 2048);
  EXPECT_EQ(static_cast<float>(p[4]), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(p[5])));
  EXPECT_EQ(static_cast<float>(p[15]), 0.0f);
  EXPECT_EQ(static_cast<float>(p[16]), std::ldexp(1.0f, -23));
  EXPECT_EQ(static_cast<float>(p[17]), std::ldexp(1.0f, -14));
}

// Every 1009th f32 bit pattern (4.3 million, all exponents and both signs), rounded.
TEST(F16, RoundingMatchesEigenAcrossTheF32Range) {
  constexpr uint64_t kStride = 1009;
  const int64_t n = static_cast<int64_t>((uint64_t{1} << 32) / kStride);
  Tensor x = empty({n}, kF32);
  uint32_t* p = static_cast<uint32_t*>(x.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(static_cast<uint64_t>(i) * kStride);
  const Tensor h = x.to(kF16);
  for (int64_t i = 0; i < n; ++i) {
    expect_same_half(bits_of(h.data<Half>()[i]), bits_of(Half(x.data<float>()[i])),
                     "f32 bits " + std::to_string(p[i]));
  }
}

TEST(F16, UnaryBinaryAndMatmulRoundOnceFromF32) {
  const Tensor xf = tricky_f32();
  const Tensor x = xf.to(kF16), xw = x.to(kF32);  // xw: exactly x's values in f32
  Generator g(4);
  const Tensor y = randn({1000}, kF32, &g).to(kF16), yw = y.to(kF32);
  expect_same_bits(relu(x), round_each(relu(xw)), "relu");
  expect_same_bits(neg(x), round_each(neg(xw)), "neg");
  expect_same_bits(add(x, y), round_each(add(xw, yw)), "add");
  expect_same_bits(mul(x, y), round_each(mul(xw, yw)), "mul");
  expect_same_bits(relu_backward(y, x), round_each(relu_backward(yw, xw)), "relu_backward");
  const Tensor s = from_vector<float>({0.3f}, {1}).to(kF16);
  expect_same_bits(add(x, s), round_each(add(xw, s.to(kF32))), "add scalar");
  const Tensor xt = x.view({25, 40}).transpose(0, 1), xtw = xw.view({25, 40}).transpose(0, 1);
  expect_same_bits(relu(xt), round_each(relu(xtw)), "relu of a transposed view");
  // A matmul of f16 operands: the f32 GEMM on their exact values, rounded once.
  const Tensor a = randn({17, 33}, kF32, &g).to(kF16), b = randn({33, 9}, kF32, &g).to(kF16);
  expect_same_bits(matmul(a, b), round_each(matmul(a.to(kF32), b.to(kF32))), "matmul");
  expect_same_bits(matmul(a, b.transpose(0, 1).contiguous().transpose(0, 1)),
                   round_each(matmul(a.to(kF32), b.to(kF32))), "matmul, transposed operand");
}

// Batch norm on f16 input computes in f32 and rounds its output once: within one f16 rounding
// of the f32 computation on the same values (its sums may add in another order).
TEST(F16, BatchNormComputesInF32) {
  Generator g(5);
  const Tensor xf = add(mul(randn({6, 4, 9, 31}, kF32, &g), 3.0), 1.5);
  const Tensor x = xf.to(kF16), xw = x.to(kF32);
  const Tensor w = randn({4}, kF32, &g), b = randn({4}, kF32, &g);
  Tensor rm = zeros({4}), rv = ones({4}), rm32 = zeros({4}), rv32 = ones({4});
  const BatchNormResult low = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  const BatchNormResult ref = batch_norm(xw, w, b, rm32, rv32, true, 0.1, 1e-5);
  ASSERT_EQ(low.output.dtype(), kF16);
  EXPECT_LT(max_abs_diff(low.mean, ref.mean), 1e-5);
  EXPECT_LT(max_abs_diff(low.invstd, ref.invstd), 1e-5);
  const Tensor diff = abs(sub(low.output.to(kF32), ref.output));
  const Tensor ulp = add(mul(abs(ref.output), 1.0 / 1024), 1e-6);  // one f16 ulp
  EXPECT_EQ(sum(gt(diff, ulp).to(kF32)).item(), 0.0);

  const Tensor grad = randn({6, 4, 9, 31}, kF32, &g).to(kF16);
  const BatchNormGrads gl = batch_norm_backward(grad, x, w, low.mean, low.invstd, true, true, true);
  const BatchNormGrads gr = batch_norm_backward(grad.to(kF32), xw, w, ref.mean, ref.invstd, true, true, true);
  ASSERT_EQ(gl.input.dtype(), kF16);
  EXPECT_LT(max_abs_diff(gl.weight, gr.weight), 1e-3);
  EXPECT_LT(max_abs_diff(gl.bias, gr.bias), 1e-3);
  const Tensor gdiff = abs(sub(gl.input.to(kF32), gr.input));
  const Tensor gulp = add(mul(abs(gr.input), 1.0 / 512), 1e-4);
  EXPECT_EQ(sum(gt(gdiff, gulp).to(kF32)).item(), 0.0);
}

}  // namespace
}  // namespace tessera
