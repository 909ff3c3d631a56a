// matmul against a triple loop: 2-D, transposed views (no copies), batched with broadcasting,
// vectors, f64 and f16; shape errors name both shapes.
#include <gtest/gtest.h>

#include "tensor/ops.h"

namespace tessera {
namespace {

// Reference: c[i][j] = sum_k a[i][k] b[k][j] in f64.
Tensor naive(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) out[i * n + j] += a.at({i, p}) * b.at({p, j});
  return from_vector<double>(out, {m, n});
}

TEST(Matmul, TwoDimensional) {
  Tensor a = randn({7, 5}, kF64), b = randn({5, 3}, kF64);
  EXPECT_LT(max_abs_diff(matmul(a, b), naive(a, b)), 1e-12);
  Tensor a32 = a.to(kF32), b32 = b.to(kF32);
  EXPECT_LT(max_abs_diff(matmul(a32, b32), naive(a, b)), 1e-5);
}

TEST(Matmul, TransposedOperandsAreNotCopied) {
  Tensor a = randn({5, 7}, kF64), b = randn({3, 5}, kF64);
  // a.t() and b.t() are views with swapped strides; matmul reads them as transposed operands.
  EXPECT_LT(max_abs_diff(matmul(a.t(), b.t()), naive(a.t().contiguous(), b.t().contiguous())),
            1e-12);
  Tensor wide = randn({5, 10}, kF64).narrow(1, 2, 3);  // row stride 10 > cols: a leading dim
  EXPECT_LT(max_abs_diff(matmul(a.t(), wide), naive(a.t().contiguous(), wide.contiguous())),
            1e-12);
}

TEST(Matmul, BatchedWithBroadcast) {
  Tensor a = randn({2, 3, 4, 5}, kF64);
  Tensor b = randn({3, 5, 2}, kF64);
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 4, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_LT(max_abs_diff(c.select(0, i).select(0, j),
                             naive(a.select(0, i).select(0, j), b.select(0, j))),
                1e-12);
  Tensor w = randn({5, 6}, kF64);  // [..., m, k] @ [k, n] folds into one GEMM
  Tensor d = matmul(a, w);
  EXPECT_LT(max_abs_diff(d.select(0, 1).select(0, 2), naive(a.select(0, 1).select(0, 2), w)),
            1e-12);
}

TEST(Matmul, Vectors) {
  Tensor v = from_vector<double>({1, 2, 3}, {3});
  Tensor m = from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2});
  EXPECT_EQ(matmul(v, v).item(), 14);
  EXPECT_EQ(matmul(v, m).to_vector<double>(), (std::vector<double>{4, 5}));
  EXPECT_EQ(matmul(m.t(), v).to_vector<double>(), (std::vector<double>{4, 5}));
}

TEST(Matmul, HalfPrecision) {
  Tensor a = randn({16, 32}), b = randn({32, 8});
  for (DType d : {kF16, kBF16}) {
    Tensor c = matmul(a.to(d), b.to(d));
    EXPECT_EQ(c.dtype(), d);
    EXPECT_TRUE(allclose(c.to(kF32), matmul(a.to(d).to(kF32), b.to(d).to(kF32)), 2e-2, 2e-2))
        << dtype_name(d);
  }
}

// bf16 runs through oneDNN on CPUs with AVX-512 BF16 (tensor/cpu/gemm_onednn.h): every operand
// layout the GEMM front end produces (transposed views, leading dimensions wider than the rows,
// batches, a broadcast operand) against f32 products of the same bf16 values.
TEST(Matmul, BF16EveryLayoutMatchesF32) {
  Generator g(42);
  const auto bf = [&g](const Shape& s) { return randn(s, kF32, &g).to(kBF16); };
  const auto check = [](const Tensor& a, const Tensor& b, const char* what) {
    const Tensor c = matmul(a, b);
    ASSERT_EQ(c.dtype(), kBF16) << what;
    const Tensor ref = matmul(a.to(kF32), b.to(kF32));
    // One bf16 rounding of the result (2^-8 relative), plus f32 summation-order differences.
    EXPECT_TRUE(allclose(c.to(kF32), ref, 8e-3, 2e-2))
        << what << ": max |diff| " << max_abs_diff(c.to(kF32), ref);
  };
  check(bf({17, 300}), bf({300, 23}), "plain");
  check(bf({300, 17}).t(), bf({300, 23}), "A transposed");
  check(bf({17, 300}), bf({23, 300}).t(), "B transposed");
  check(bf({300, 17}).t(), bf({23, 300}).t(), "both transposed");
  check(bf({17, 64}).narrow(1, 0, 40), bf({40, 64}).narrow(1, 3, 23), "wide leading dims");
  check(bf({4, 9, 33}), bf({4, 33, 12}), "batched");
  check(bf({4, 33, 9}).transpose(1, 2), bf({33, 12}), "batched A, broadcast B");
  check(bf({9, 33}), bf({4, 12, 33}).transpose(1, 2), "broadcast A, batched B");
  check(bf({1, 1}), bf({1, 1}), "1x1");
}

TEST(Matmul, ShapeErrorNamesBothShapes) {
  try {
    matmul(zeros({64, 784}), zeros({10, 784}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: inner dimensions differ: [64, 784] x [10, 784]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(matmul(zeros({2, 2}), zeros({2, 2}, kF64)), Error);
}

}  // namespace
}  // namespace tessera
