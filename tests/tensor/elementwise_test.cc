// Elementwise ops against values written out by hand: broadcasting, promotion, scalars,
// comparisons, where, clamp, in-place ops, f16/bf16 computed in f32.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/ops.h"

namespace tessera {
namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

TEST(Elementwise, BinaryOpsWithBroadcasting) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = from_vector<float>({10, 20, 30}, {3});
  Tensor col = from_vector<float>({100, 200}, {2, 1});
  EXPECT_EQ(values(a + row), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(values(a - col), (std::vector<double>{-99, -98, -97, -196, -195, -194}));
  EXPECT_EQ(values(row * col).size(), 6u);
  EXPECT_EQ((row * col).shape(), (Shape{2, 3}));
  EXPECT_EQ(values(row * col), (std::vector<double>{1000, 2000, 3000, 2000, 4000, 6000}));
  EXPECT_EQ(values(a / 2.0), (std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3}));
  EXPECT_EQ(values(1.0 - a), (std::vector<double>{0, -1, -2, -3, -4, -5}));
  EXPECT_EQ(values(maximum(a, 3.5)), (std::vector<double>{3.5, 3.5, 3.5, 4, 5, 6}));
  EXPECT_EQ(values(minimum(a, row)), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(values(pow(a, 2.0)), (std::vector<double>{1, 4, 9, 16, 25, 36}));
  EXPECT_NEAR(pow(a, 0.5).at({1, 0}), 2.0, 1e-6);
  EXPECT_THROW(add(zeros({2, 3}), zeros({4})), Error);
}

TEST(Elementwise, BroadcastOnNonContiguousInputs) {
  Tensor a = arange(0, 12, 1, kF32).view({3, 4}).t();  // [4, 3], strided
  Tensor b = from_vector<float>({1, 2, 3}, {3});
  Tensor c = a * b;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(c.at({i, j}), (j * 4 + i) * (j + 1));
  }
}

TEST(Elementwise, TypePromotion) {
  Tensor i = from_vector<int64_t>({1, 2, 3}, {3});
  Tensor f = from_vector<float>({0.5, 0.5, 0.5}, {3});
  EXPECT_EQ((i + f).dtype(), kF32);
  EXPECT_EQ((i + i).dtype(), kI64);
  EXPECT_EQ((i / 2.0).dtype(), kF32);  // true division
  EXPECT_EQ(values(i / 2.0), (std::vector<double>{0.5, 1, 1.5}));
  EXPECT_EQ((i * 0.5).dtype(), kF32);
  EXPECT_EQ((i * 2.0).dtype(), kI64);
  EXPECT_EQ((f.to(kF64) + f).dtype(), kF64);
  EXPECT_EQ((f.to(kF16) + f.to(kBF16)).dtype(), kF32);
}

TEST(Elementwise, UnaryOps) {
  Tensor x = from_vector<double>({-2, -0.5, 0, 0.5, 2}, {5});
  const std::vector<double> v = values(x);
  auto check = [&](const Tensor& got, double (*f)(double)) {
    const std::vector<double> g = values(got);
    for (size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(g[k], f(v[k]), 1e-12) << v[k];
  };
  check(neg(x), [](double a) { return -a; });
  check(abs(x), [](double a) { return std::fabs(a); });
  check(exp(x), [](double a) { return std::exp(a); });
  check(tanh(x), [](double a) { return std::tanh(a); });
  check(sigmoid(x), [](double a) { return 1 / (1 + std::exp(-a)); });
  check(relu(x), [](double a) { return a > 0 ? a : 0.0; });
  check(sign(x), [](double a) { return double((a > 0) - (a < 0)); });
  check(square(x), [](double a) { return a * a; });
  check(clamp(x, -1, 1), [](double a) { return std::min(1.0, std::max(-1.0, a)); });
  Tensor p = from_vector<double>({0.25, 1, 4}, {3});
  EXPECT_EQ(values(sqrt(p)), (std::vector<double>{0.5, 1, 2}));
  EXPECT_EQ(values(rsqrt(p)), (std::vector<double>{2, 1, 0.5}));
  EXPECT_EQ(values(reciprocal(p)), (std::vector<double>{4, 1, 0.25}));
  EXPECT_NEAR(log(p).at({2}), std::log(4.0), 1e-12);
  EXPECT_EQ(exp(from_vector<int64_t>({0}, {1})).dtype(), kF32);
}

TEST(Elementwise, BackwardHelpers) {
  Tensor g = from_vector<double>({1, 2, 3}, {3});
  Tensor x = from_vector<double>({-1, 0, 2}, {3});
  EXPECT_EQ(values(relu_backward(g, x)), (std::vector<double>{0, 0, 3}));
  Tensor y = from_vector<double>({0.5, 0.25, 0.0}, {3});
  EXPECT_EQ(values(sigmoid_backward(g, y)), (std::vector<double>{0.25, 2 * 0.25 * 0.75, 0}));
  EXPECT_EQ(values(tanh_backward(g, y)), (std::vector<double>{0.75, 2 * (1 - 0.0625), 3}));
}

TEST(Elementwise, ComparisonsAndWhere) {
  Tensor a = from_vector<float>({1, 2, 3}, {3});
  Tensor b = from_vector<float>({3, 2, 1}, {3});
  EXPECT_EQ(lt(a, b).dtype(), kBool);
  EXPECT_EQ(lt(a, b).to(kF32).to_vector<float>(), (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(eq(a, b).to(kF32).to_vector<float>(), (std::vector<float>{0, 1, 0}));
  EXPECT_EQ(ge(a, 2.0).to(kF32).to_vector<float>(), (std::vector<float>{0, 1, 1}));
  Tensor w = where(gt(a, b), a, from_vector<float>({-1}, {1}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-1, -1, 3}));
  EXPECT_THROW(where(a, a, b), Error);  // condition must be bool
}

TEST(Elementwise, InPlace) {
  Tensor a = ones({2, 2});
  add_(a, from_vector<float>({1, 2}, {2}), 0.5);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5, 2, 1.5, 2}));
  mul_(a, 2.0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 4, 3, 4}));
  Tensor col = a.narrow(1, 0, 1);  // non-contiguous in-place target
  add_(col, ones({2, 1}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
}

TEST(Elementwise, HalfPrecisionComputesInFloat) {
  for (DType d : {kF16, kBF16}) {
    Tensor a = from_vector<float>({1, 2, 3}, {3}).to(d);
    Tensor b = (a * a + 1.0);
    EXPECT_EQ(b.dtype(), d);
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{2, 5, 10})) << dtype_name(d);
    EXPECT_NEAR(exp(a).at({0}), std::exp(1.0), std::exp(1.0) * 1e-2);
  }
}

TEST(Elementwise, LargeTensorsRunInParallelAndMatchSerial) {
  const int64_t n = 1 << 20;
  Tensor a = arange(0, n, 1, kF32);
  Tensor b = (a * 2.0 - 1.0).view({1024, 1024}).t();  // strided
  Tensor c = b + b.t().contiguous().t();
  const std::vector<float> v = c.contiguous().to_vector<float>();
  for (int64_t k : {int64_t{0}, int64_t{12345}, n - 1}) {
    const int64_t i = k / 1024, j = k % 1024;  // c[i][j] = 2 * b[i][j] = 2 * (2 * (j*1024+i) - 1)
    EXPECT_EQ(v[k], 2.0f * (2.0f * (j * 1024 + i) - 1.0f));
  }
}

}  // namespace
}  // namespace tessera
