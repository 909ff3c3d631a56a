// The transformer layers' CUDA kernels (layer_norm.cu, gelu.cu, embedding.cu) against their CPU
// twins on the same inputs, per dtype (f64 ~1e-10, f32 ~1e-5, f16/bf16 ~1e-2 relative). Skips,
// naming the reason, when this binary has no CUDA backend or the machine has no GPU.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/tensor/cuda_compare.h"

namespace tessera {
namespace {

using CudaTransformerOps = testing::CudaTest;
using testing::expect_close;
using testing::kFloatTypes;
using testing::random_cpu;
using testing::tolerance;

TEST_F(CudaTransformerOps, LayerNormForwardAndBackwardMatchCpu) {
  // 300 rows: several of the backward's row chunks; 771 features: not a multiple of a block.
  for (const DType t : kFloatTypes) {
    const Tensor x = random_cpu({3, 100, 771}, t, 1), g = random_cpu({3, 100, 771}, t, 2);
    const Tensor w = random_cpu({771}, t, 3), b = random_cpu({771}, t, 4);
    const double tol = tolerance(t);
    const std::string name = std::string("layer_norm ") + dtype_name(t);
    const LayerNormResult cpu = layer_norm(x, w, b);
    const LayerNormResult cuda = layer_norm(x.to(gpu), w.to(gpu), b.to(gpu));
    expect_close(cuda.output, cpu.output, tol, name + " output");
    expect_close(cuda.mean, cpu.mean, tol, name + " mean");
    expect_close(cuda.rstd, cpu.rstd, tol, name + " rstd");
    const LayerNormGrads gc = layer_norm_backward(g, x, w, cpu.mean, cpu.rstd, true, true, true);
    const LayerNormGrads gg = layer_norm_backward(g.to(gpu), x.to(gpu), w.to(gpu), cuda.mean,
                                                  cuda.rstd, true, true, true);
    expect_close(gg.input, gc.input, tol, name + " dx");
    // Sums over 300 rows: the two devices add in different orders.
    expect_close(gg.weight, gc.weight, 10 * tolerance(kF32), name + " dweight");
    expect_close(gg.bias, gc.bias, 10 * tolerance(kF32), name + " dbias");
    // Only the parameters' gradients, and only the input's.
    const LayerNormGrads only_w = layer_norm_backward(g.to(gpu), x.to(gpu), Tensor(), cuda.mean,
                                                      cuda.rstd, false, true, false);
    EXPECT_FALSE(only_w.input.defined());
    const LayerNormGrads only_x = layer_norm_backward(g.to(gpu), x.to(gpu), w.to(gpu), cuda.mean,
                                                      cuda.rstd, true, false, false);
    expect_close(only_x.input, gc.input, tol, name + " dx alone");
  }
}

TEST_F(CudaTransformerOps, GeluForwardAndBackwardMatchCpu) {
  for (const DType t : kFloatTypes) {
    const Tensor x = random_cpu({7, 333}, t, 5), g = random_cpu({7, 333}, t, 6);
    for (const GeluApproximate a : {GeluApproximate::kTanh, GeluApproximate::kNone}) {
      const std::string name = std::string("gelu ") + dtype_name(t) +
                               (a == GeluApproximate::kTanh ? " tanh" : " exact");
      expect_close(gelu(x.to(gpu), a), gelu(x, a), tolerance(t), name);
      expect_close(gelu_backward(g.to(gpu), x.to(gpu), a), gelu_backward(g, x, a), tolerance(t),
                   name + " backward");
    }
  }
}

TEST_F(CudaTransformerOps, EmbeddingForwardAndBackwardMatchCpu) {
  // 1000 tokens from a vocabulary of 300 (many repeats, rows in several blocks) of 97 columns.
  Generator gen(7);
  const Tensor idx = uniform({10, 100}, 0, 300, kF64, &gen).to(kI64);
  for (const DType t : kFloatTypes) {
    const Tensor w = random_cpu({300, 97}, t, 8), g = random_cpu({10, 100, 97}, t, 9);
    const std::string name = std::string("embedding ") + dtype_name(t);
    expect_close(embedding(w.to(gpu), idx.to(gpu)), embedding(w, idx), 0, name);
    expect_close(embedding_backward(g.to(gpu), idx.to(gpu), 300, t),
                 embedding_backward(g, idx, 300, t), tolerance(t), name + " backward");
  }
  // The range check runs on the device's indices too.
  try {
    embedding(zeros({300, 4}, gpu), from_vector<int64_t>({1, 300}, {2}).to(gpu));
    ADD_FAILURE() << "no error for index 300";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 300 (element 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
