// batch_norm_relu (batch norm + ReLU, optionally with a residual added before the ReLU, in one
// pass) against the unfused ops, Backend's default composition, and the mask's edge values.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

// batch_norm_relu against the unfused ops it replaces, relu(batch_norm(x) + residual), on odd
// shapes (batch 1, one value per channel row, maps smaller and larger than a vector and than a
// bf16 block), non-contiguous inputs, every floating dtype, training and eval, with and
// without residual and affine parameters, at 1 and 2 threads. The running statistics must be
// equal; the f32/f64 output too (same arithmetic), the f16/bf16 output within one rounding
// (the fused op rounds once, the unfused three times). The backward gets the same mask (the
// fused output) on both sides, and must then be equal in every dtype: the masked gradient is
// exact in the storage type and runs through the same batch-norm code.
TEST(BatchNormRelu, MatchesTheUnfusedOps) {
  struct Case {
    Shape shape;
    bool transposed;  // input and residual as non-contiguous views
  };
  const std::vector<Case> cases = {{{1, 3, 5, 7}, false},  {{1, 5, 1, 3}, true},
                                   {{3, 1, 2, 1}, false},  {{2, 5, 17, 19}, true},
                                   {{1, 3, 1, 300}, false}};
  const int before = num_threads();
  for (const Case& k : cases) {
    for (DType dt : {kF32, kF64, kBF16, kF16}) {
      for (bool training : {true, false}) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool with_residual = variant & 1, affine = variant & 2;
          SCOPED_TRACE(::testing::Message() << shape_str(k.shape) << " " << dt << (training ? " train" : " eval")
                                            << (with_residual ? " residual" : "")
                                            << (affine ? " affine" : ""));
          const int64_t c = k.shape[1];
          const auto make = [&](const Shape& s) {
            Shape stored = s;
            if (k.transposed) std::swap(stored[1], stored[2]);
            Tensor t = randn(stored, dt);
            return k.transposed ? t.transpose(1, 2) : t;
          };
          const Tensor x = make(k.shape), res = with_residual ? make(k.shape) : Tensor();
          const TensorOptions stat = dt == kF64 ? kF64 : kF32;
          const Tensor w = affine ? add(randn({c}, kF64), 1.0).to(stat) : Tensor();
          const Tensor b = affine ? randn({c}, kF64).to(stat) : Tensor();
          const Tensor g = make(k.shape).contiguous();
          const Tensor rm0 = randn({c}, kF64).to(stat), rv0 = add(rand({c}, kF64), 0.5).to(stat);
          std::vector<std::vector<double>> runs;
          for (int threads : {1, 2}) {
            set_num_threads(threads);
            Tensor rm = rm0.clone(), rv = rv0.clone(), erm = rm0.clone(), erv = rv0.clone();
            const BatchNormResult fused =
                batch_norm_relu(x, w, b, res, rm, rv, training, 0.1, 1e-5);
            const BatchNormResult plain = batch_norm(x, w, b, erm, erv, training, 0.1, 1e-5);
            const Tensor want = relu(with_residual ? add(plain.output, res) : plain.output);
            EXPECT_EQ(fused.output.dtype(), dt);
            EXPECT_EQ(fused.output.shape(), k.shape);
            // A few roundings at the output's magnitude (unit roundoff 2^-8 bf16, 2^-11 f16).
            const double unit = dt == kBF16 ? 1.0 / 256 : dt == kF16 ? 1.0 / 2048 : 0.0;
            const double tol = 4 * unit * (1 + amax(abs(want.to(kF64))).item());
            EXPECT_LE(max_abs_diff(fused.output.to(kF64), want.to(kF64)), tol);
            EXPECT_EQ(max_abs_diff(rm, erm), 0.0);
            EXPECT_EQ(max_abs_diff(rv, erv), 0.0);

            const BatchNormReluGrads d = batch_norm_relu_backward(
                g, fused.output, x, w, fused.mean, fused.invstd, training, true, true,
                with_residual);
            const Tensor masked = relu_backward(g, fused.output);
            const BatchNormGrads e = batch_norm_backward(masked, x, w, plain.mean, plain.invstd,
                                                         training, true, true);
            EXPECT_EQ(max_abs_diff(d.input.to(kF64), e.input.to(kF64)), 0.0);
            EXPECT_EQ(max_abs_diff(d.weight, e.weight), 0.0);
            EXPECT_EQ(max_abs_diff(d.bias, e.bias), 0.0);
            if (with_residual) {
              EXPECT_EQ(d.residual.dtype(), dt);
              EXPECT_EQ(max_abs_diff(d.residual.to(kF64), masked.to(kF64)), 0.0);
            } else {
              EXPECT_FALSE(d.residual.defined());
            }
            std::vector<double> all = fused.output.to_vector<double>();
            for (const Tensor& t : {d.input, d.weight}) {
              const std::vector<double> v = t.to_vector<double>();
              all.insert(all.end(), v.begin(), v.end());
            }
            runs.push_back(all);
          }
          set_num_threads(before);
          EXPECT_EQ(runs[0], runs[1]);
        }
      }
    }
  }
}

// Backend's default (what the CUDA backend runs: batch_norm_apply, binary, unary; and
// relu_backward's kernel before batch_norm_backward) gives what the CPU's fused kernels give.
TEST(BatchNormRelu, BackendDefaultEqualsTheFusedKernels) {
  Backend& cpu = backend(DeviceType::kCPU);
  for (DType dt : {kF32, kBF16}) {
    for (bool with_residual : {false, true}) {
      const Tensor x = randn({2, 3, 9}, dt), g = randn({2, 3, 9}, dt);
      const Tensor res = with_residual ? randn({2, 3, 9}, dt) : Tensor();
      const Tensor w = randn({3}), b = randn({3});
      const BatchNormResult r = batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);
      Tensor fused = empty(x.shape(), dt), composed = empty(x.shape(), dt);
      cpu.batch_norm_apply_relu(x, r.mean, r.invstd, w, b, res, fused);
      cpu.Backend::batch_norm_apply_relu(x, r.mean, r.invstd, w, b, res, composed);
      EXPECT_LE(max_abs_diff(fused.to(kF64), composed.to(kF64)), dt == kF32 ? 0.0 : 0.05);
      const auto buffers = [&] {
        return BatchNormReluGrads{empty(x.shape(), dt), empty({3}), empty({3}),
                                  with_residual ? empty(x.shape(), dt) : Tensor()};
      };
      const BatchNormReluGrads a = buffers(), c = buffers();
      cpu.batch_norm_relu_backward(g, fused, x, r.mean, r.invstd, w, true, a.input, a.weight,
                                   a.bias, a.residual);
      cpu.Backend::batch_norm_relu_backward(g, fused, x, r.mean, r.invstd, w, true, c.input,
                                            c.weight, c.bias, c.residual);
      EXPECT_EQ(max_abs_diff(a.input.to(kF64), c.input.to(kF64)), 0.0) << dt;
      EXPECT_EQ(max_abs_diff(a.weight, c.weight), 0.0) << dt;
      EXPECT_EQ(max_abs_diff(a.bias, c.bias), 0.0) << dt;
      if (with_residual) {
        EXPECT_EQ(max_abs_diff(a.residual.to(kF64), c.residual.to(kF64)), 0.0);
      }
    }
  }
}

// The mask from the saved output, literally: y > 0 passes the gradient; +0, -0, negatives, -inf
// and NaN stop it, the smallest subnormal and +inf pass it, as relu_backward (f16 and bf16 test
// their bits).
TEST(BatchNormRelu, MaskIsOutputGreaterThanZero) {
  const double inf = INFINITY, nan = NAN;
  const std::vector<double> y = {0.0, -0.0, 1e-40, 1e-7, -1.0, inf, -inf, nan, 2.0};
  for (DType dt : {kF32, kF64, kBF16, kF16}) {
    const Tensor out = from_vector<double>(y, {1, 1, 9}).to(dt);
    const Tensor g = full({1, 1, 9}, 3.0, dt), x = randn({1, 1, 9}, dt);
    const TensorOptions stat = dt == kF64 ? kF64 : kF32;
    const BatchNormReluGrads d = batch_norm_relu_backward(
        g, out, x, Tensor(), zeros({1}, stat), ones({1}, stat), true, false, false, true);
    EXPECT_EQ(d.residual.to_vector<double>(), relu_backward(g, out).to_vector<double>()) << dt;
  }
}

TEST(BatchNormRelu, RejectsAResidualThatDoesNotMatch) {
  const Tensor x = randn({2, 3, 4, 4}), w = ones({3}), b = zeros({3});
  EXPECT_THROW(batch_norm_relu(x, w, b, randn({2, 3, 4, 5}), Tensor(), Tensor(), true, 0.1, 1e-5),
               Error);
  EXPECT_THROW(batch_norm_relu(x, w, b, randn({2, 3, 4, 4}, kF64), Tensor(), Tensor(), true, 0.1,
                               1e-5),
               Error);
  EXPECT_THROW(batch_norm_relu(zeros({1, 3}), w, b, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5),
               Error);
}

}  // namespace
}  // namespace tessera
