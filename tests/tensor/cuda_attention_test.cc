// causal_attention on CUDA (tensor/cuda/attention.cu) against its CPU twin on the same inputs:
// output, logsumexp and the three gradients, f32 and f64, lengths on and off the kernels' tiles;
// blocks of keys at other positions than the queries (ring attention's step).
// Skips, naming the reason, when this binary has no CUDA backend or the machine has no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tensor/accelerator.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

class CudaAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_is_available()) GTEST_SKIP() << "no CUDA: " << cuda_unavailable_reason();
  }
  const Device gpu = Device::cuda(0);
};

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kF64, &gen).to(dtype);
}

void expect_close(const Tensor& cuda_result, const Tensor& cpu_result, double tol,
                  const std::string& what) {
  ASSERT_TRUE(cuda_result.device().is_cuda()) << what;
  ASSERT_EQ(cuda_result.shape(), cpu_result.shape()) << what;
  ASSERT_EQ(cuda_result.dtype(), cpu_result.dtype()) << what;
  const Tensor a = cuda_result.cpu().to(kF64), b = cpu_result.to(kF64);
  EXPECT_TRUE(allclose(a, b, tol, tol)) << what << ": max |diff| = " << max_abs_diff(a, b);
}

TEST_F(CudaAttention, MatchesTheCpu) {
  for (const DType dtype : {kF32, kF64}) {
    const double tol = dtype == kF32 ? 1e-5 : 1e-10;
    for (const int64_t t : {1, 31, 32, 33, 100}) {
      for (const int64_t d : {3, 64}) {
        const std::string what = std::string(dtype == kF32 ? "f32" : "f64") +
                                 " T=" + std::to_string(t) + " D=" + std::to_string(d);
        const Shape shape{2, 3, t, d};
        const Tensor q = random(shape, dtype, 1), k = random(shape, dtype, 2),
                     v = random(shape, dtype, 3), g = random(shape, dtype, 4);
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const auto cpu = causal_attention(q, k, v, scale);
        const auto cuda = causal_attention(q.to(gpu), k.to(gpu), v.to(gpu), scale);
        expect_close(cuda.output, cpu.output, tol, "output, " + what);
        expect_close(cuda.logsumexp, cpu.logsumexp, tol, "logsumexp, " + what);
        const auto cpu_grads =
            causal_attention_backward(g, q, k, v, cpu.output, cpu.logsumexp, scale);
        const auto cuda_grads =
            causal_attention_backward(g.to(gpu), q.to(gpu), k.to(gpu), v.to(gpu), cuda.output,
                                      cuda.logsumexp, scale);
        expect_close(cuda_grads.q, cpu_grads.q, tol, "grad q, " + what);
        expect_close(cuda_grads.k, cpu_grads.k, tol, "grad k, " + what);
        expect_close(cuda_grads.v, cpu_grads.v, tol, "grad v, " + what);
      }
    }
  }
}

// One block of keys at other positions than the queries (ring attention's step): head-tail
// runs, keys partly after the queries and a block hidden from every query (O = 0, L = -inf).
TEST_F(CudaAttention, BlocksByPositionMatchTheCpu) {
  using P = AttentionPositions;
  const P queries{{{3, 20}, {70, 17}}};
  for (const P& keys : {P{{{0, 25}, {40, 14}}}, P::contiguous(10, 45), P::contiguous(100, 33)}) {
    const int64_t tq = queries.rows(), tk = keys.rows();
    const Tensor q = random({2, 3, tq, 8}, kF32, 8), k = random({2, 3, tk, 8}, kF32, 9),
                 v = random({2, 3, tk, 8}, kF32, 10), g = random({2, 3, tq, 8}, kF32, 11);
    const auto cpu = causal_attention_block(q, k, v, 0.4, queries, keys);
    const auto cuda = causal_attention_block(q.to(gpu), k.to(gpu), v.to(gpu), 0.4, queries, keys);
    expect_close(cuda.output, cpu.output, 1e-5, "block output");
    // Rows hidden from every key: -inf on both (compared as equal), the rest within 1e-5.
    const Tensor cpu_lse = cpu.logsumexp, cuda_lse = cuda.logsumexp.cpu();
    EXPECT_EQ(eq(cpu_lse, -INFINITY).to(kI64).to_vector<int64_t>(),
              eq(cuda_lse, -INFINITY).to(kI64).to_vector<int64_t>());
    const Tensor zero = scalar_tensor(0.0, kF32);
    EXPECT_TRUE(allclose(where(eq(cuda_lse, -INFINITY), zero, cuda_lse),
                         where(eq(cpu_lse, -INFINITY), zero, cpu_lse), 1e-5, 1e-5));
    const auto cpu_grads =
        causal_attention_block_backward(g, q, k, v, cpu.output, cpu.logsumexp, 0.4, queries, keys);
    const auto cuda_grads = causal_attention_block_backward(
        g.to(gpu), q.to(gpu), k.to(gpu), v.to(gpu), cuda.output, cuda.logsumexp, 0.4, queries,
        keys);
    expect_close(cuda_grads.q, cpu_grads.q, 1e-5, "block grad q");
    expect_close(cuda_grads.k, cpu_grads.k, 1e-5, "block grad k");
    expect_close(cuda_grads.v, cpu_grads.v, 1e-5, "block grad v");
  }
}

TEST_F(CudaAttention, HalfPrecisionMatchesTheCpu) {
  const Shape shape{1, 2, 40, 16};
  const Tensor q = random(shape, kBF16, 5), k = random(shape, kBF16, 6), v = random(shape, kBF16, 7);
  const auto cpu = causal_attention(q, k, v, 0.25);
  const auto cuda = causal_attention(q.to(gpu), k.to(gpu), v.to(gpu), 0.25);
  expect_close(cuda.output, cpu.output, 1e-2, "bf16 output");
}

}  // namespace
}  // namespace tessera
