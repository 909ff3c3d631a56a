// Reductions over any dims with keepdim, against loops written out here.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

// Values that do not sum exactly in f32: x * 0.001 - floor-ish wobble.
Tensor sin_like(const Tensor& x) { return tanh(x * 1e-3 - 100.0) + x * 1e-7; }

Tensor iota(const Shape& shape, DType dtype = kF64) {
  return arange(0, static_cast<double>(numel(shape)), 1, dtype).view(shape);
}

TEST(Reduce, SumAndMeanOverDims) {
  Tensor t = iota({2, 3, 4});  // t[i][j][k] = 12 i + 4 j + k
  EXPECT_EQ(sum(t).item(), 276);
  EXPECT_EQ(mean(t).item(), 11.5);
  Tensor s1 = sum(t, {1});
  EXPECT_EQ(s1.shape(), (Shape{2, 4}));
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(s1.at({i, k}), 3 * (12 * i + k) + 4 * 3);
  }
  Tensor s02 = sum(t, {0, -1}, true);
  EXPECT_EQ(s02.shape(), (Shape{1, 3, 1}));
  for (int j = 0; j < 3; ++j) {
    double want = 0;
    for (int i = 0; i < 2; ++i) for (int k = 0; k < 4; ++k) want += 12 * i + 4 * j + k;
    EXPECT_EQ(s02.at({0, j, 0}), want);
  }
  EXPECT_THROW(sum(t, {3}), Error);
  EXPECT_THROW(sum(t, {1, 1}), Error);
}

TEST(Reduce, VarianceWithCorrection) {
  Tensor t = from_vector<double>({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  Tensor v = var(t, {1});
  EXPECT_NEAR(v.at({0}), 5.0 / 3.0, 1e-12);    // sum sq dev 5, n - 1 = 3
  EXPECT_NEAR(v.at({1}), 500.0 / 3.0, 1e-10);
  EXPECT_NEAR(var(t, {1}, 0).at({0}), 1.25, 1e-12);
}

TEST(Reduce, MaxMinArgmax) {
  Tensor t = from_vector<float>({3, 9, 1, 9, -4, 0}, {2, 3});
  auto [values, indices] = max(t, 1);
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{9, 9}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));  // first maximum
  EXPECT_EQ(argmin(t, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(amax(t).item(), 9);
  EXPECT_EQ(amin(t, {0}, true).shape(), (Shape{1, 3}));
  EXPECT_THROW(amax(zeros({0, 2}), {0}), Error);
}

TEST(Reduce, IntegerAndBoolSums) {
  Tensor b = gt(from_vector<float>({1, 5, 3, 7}, {4}), 2.0);
  Tensor n = sum(b);
  EXPECT_EQ(n.dtype(), kI64);
  EXPECT_EQ(n.item(), 3);
  EXPECT_EQ(sum(from_vector<int32_t>({1, 2, 3}, {3})).dtype(), kI64);
  EXPECT_EQ(mean(from_vector<int64_t>({1, 2}, {2})).item(), 1.5);
}

TEST(Reduce, LongRowsAreDeterministicAcrossThreadCounts) {
  Tensor t = sin_like(arange(0, 1 << 20, 1, kF32));
  const int before = num_threads();
  set_num_threads(1);
  const double one = sum(t).item();
  set_num_threads(2);
  const double two = sum(t).item();
  set_num_threads(before);
  EXPECT_EQ(one, two);  // bitwise
  double want = 0;
  for (float v : t.to_vector<float>()) want += v;
  EXPECT_NEAR(one, want, 1e-6 * std::fabs(want) + 1e-3);
}

TEST(Reduce, SumTo) {
  Tensor g = ones({4, 2, 3});
  EXPECT_EQ(sum_to(g, {2, 1}).to_vector<float>(), (std::vector<float>{12, 12}));
  EXPECT_EQ(sum_to(g, {3}).to_vector<float>(), (std::vector<float>{8, 8, 8}));
  EXPECT_EQ(sum_to(g, {}).item(), 24);
}

}  // namespace
}  // namespace tessera
