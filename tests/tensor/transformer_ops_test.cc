// The transformer layers' ops (tensor/ops_transformer.cc) on the CPU: layer norm against its
// statistics and gradients computed by plain loops in f64, GELU against its formulas and values
// written out by hand, embedding forward and backward on literal tables (repeated indices
// summing); f16/bf16 against f32, results independent of the thread count, and the errors bad
// arguments get.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace {

using testing::expect_error;

Tensor random(const Shape& shape, uint64_t seed, DType dtype = kF32) {
  Generator gen(seed);
  return randn(shape, kF64, &gen).to(dtype);
}

std::vector<double> values(const Tensor& t) {
  const Tensor d = t.to(kF64).contiguous();
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

// ---------------------------------------------------------------------------- layer norm

// Layer norm of rows [rows, n] with plain loops in f64: the reference for forward and backward.
struct Reference {
  std::vector<double> y, mean, rstd, dx, dweight, dbias;
};

Reference reference_layer_norm(const Tensor& x_t, const Tensor& w_t, const Tensor& b_t,
                               const Tensor& g_t, double eps) {
  const int64_t n = x_t.size(-1), rows = x_t.numel() / n;
  const std::vector<double> x = values(x_t), w = values(w_t), b = values(b_t), g = values(g_t);
  Reference r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dweight.assign(n, 0.0);
  r.dbias.assign(n, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[i * n];
    const double* gr = &g[i * n];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += xr[j] / n;
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mean) * (xr[j] - mean) / n;
    const double rstd = 1 / std::sqrt(var + eps);
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
    // dx by the chain rule through mean and var, written out term by term (not the fused
    // formula the kernels use): y_j = xhat_j w_j + b_j, xhat_j = (x_j - mean) rstd.
    double dvar = 0, dmean = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double xhat = (xr[j] - mean) * rstd;
      r.y[i * n + j] = xhat * w[j] + b[j];
      r.dweight[j] += gr[j] * xhat;
      r.dbias[j] += gr[j];
      dvar += gr[j] * w[j] * (xr[j] - mean) * -0.5 * std::pow(var + eps, -1.5);
      dmean += -gr[j] * w[j] * rstd;
    }
    for (int64_t j = 0; j < n; ++j) {
      r.dx[i * n + j] = gr[j] * w[j] * rstd + dvar * 2 * (xr[j] - mean) / n + dmean / n;
    }
  }
  return r;
}

void expect_near_all(const Tensor& actual, const std::vector<double>& expected, double tol,
                     const char* what) {
  const std::vector<double> a = values(actual);
  ASSERT_EQ(a.size(), expected.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], expected[i], tol * (1 + std::abs(expected[i]))) << what << " at " << i;
  }
}

TEST(LayerNorm, ForwardAndBackwardMatchPlainLoopsInF64) {
  // Odd sizes: 37 features (not a multiple of the 16 lanes), 15 rows in [3, 5].
  for (const DType dtype : {kF32, kF64}) {
    const Tensor x = random({3, 5, 37}, 1, dtype), w = random({37}, 2, dtype),
                 b = random({37}, 3, dtype), g = random({3, 5, 37}, 4, dtype);
    const double eps = 1e-5;
    const Reference ref = reference_layer_norm(x, w, b, g, eps);
    const LayerNormResult r = layer_norm(x, w, b, eps);
    const double tol = dtype == kF64 ? 1e-12 : 2e-6;
    EXPECT_EQ(r.output.shape(), x.shape());
    EXPECT_EQ(r.output.dtype(), dtype);
    EXPECT_EQ(r.mean.shape(), Shape({15}));
    expect_near_all(r.output, ref.y, tol, "output");
    expect_near_all(r.mean, ref.mean, tol, "mean");
    expect_near_all(r.rstd, ref.rstd, tol, "rstd");
    const LayerNormGrads grads =
        layer_norm_backward(g, x, w, r.mean, r.rstd, true, true, true);
    expect_near_all(grads.input, ref.dx, 10 * tol, "dx");
    expect_near_all(grads.weight, ref.dweight, 10 * tol, "dweight");
    expect_near_all(grads.bias, ref.dbias, 10 * tol, "dbias");
  }
}

TEST(LayerNorm, HandComputedRow) {
  // x = [1, 2, 3, 4]: mean 2.5, biased variance 1.25; eps = 0.75 makes var + eps = 2, so
  // y = (x - 2.5) / sqrt(2) * w + b.
  const Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 4});
  const Tensor w = from_vector<float>({1, 2, 1, 1}, {4});
  const Tensor b = from_vector<float>({0, 0, 0, 10}, {4});
  const LayerNormResult r = layer_norm(x, w, b, 0.75);
  const double s = 1 / std::sqrt(2.0);
  expect_near_all(r.output, {-1.5 * s, -0.5 * s * 2, 0.5 * s, 1.5 * s + 10}, 1e-6, "y");
  expect_near_all(r.mean, {2.5}, 1e-7, "mean");
  expect_near_all(r.rstd, {s}, 1e-7, "rstd");
}

TEST(LayerNorm, AbsentWeightAndBiasAreOnesAndZeros) {
  const Tensor x = random({4, 9}, 5), g = random({4, 9}, 6);
  const LayerNormResult plain = layer_norm(x, Tensor(), Tensor());
  const LayerNormResult affine = layer_norm(x, ones({9}), zeros({9}));
  EXPECT_TRUE(allclose(plain.output, affine.output, 0, 0));
  const LayerNormGrads a = layer_norm_backward(g, x, Tensor(), plain.mean, plain.rstd, true,
                                               false, false);
  const LayerNormGrads b = layer_norm_backward(g, x, ones({9}), affine.mean, affine.rstd, true,
                                               true, true);
  EXPECT_TRUE(allclose(a.input, b.input, 0, 0));
  EXPECT_FALSE(a.weight.defined());
  EXPECT_FALSE(a.bias.defined());
}

TEST(LayerNorm, ParameterGradientsAreTheSameBitsOnAnyThreadCount) {
  // 101 rows: several blocks of rows, the last one short.
  const Tensor x = random({101, 67}, 7), w = random({67}, 8), g = random({101, 67}, 9);
  const int before = num_threads();
  std::vector<LayerNormGrads> runs;
  for (const int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const LayerNormResult r = layer_norm(x, w, Tensor());
    runs.push_back(layer_norm_backward(g, x, w, r.mean, r.rstd, true, true, true));
  }
  set_num_threads(before);
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_TRUE(allclose(runs[i].input, runs[0].input, 0, 0));
    EXPECT_TRUE(allclose(runs[i].weight, runs[0].weight, 0, 0));
    EXPECT_TRUE(allclose(runs[i].bias, runs[0].bias, 0, 0));
  }
}

TEST(LayerNorm, HalfPrecisionInputsComputeInF32) {
  for (const DType half : {kF16, kBF16}) {
    // The same (rounded) values in both dtypes, so only the outputs' rounding differs.
    const Tensor x = random({6, 50}, 10, half), g = random({6, 50}, 11, half);
    const Tensor w = random({50}, 12), b = random({50}, 13);
    const LayerNormResult lo = layer_norm(x, w.to(half), b.to(half));
    const LayerNormResult hi = layer_norm(x.to(kF32), w.to(half).to(kF32), b.to(half).to(kF32));
    EXPECT_EQ(lo.output.dtype(), half);
    EXPECT_EQ(lo.mean.dtype(), kF32);
    EXPECT_TRUE(allclose(lo.output.to(kF32), hi.output, 1e-2, 1e-2));
    EXPECT_TRUE(allclose(lo.mean, hi.mean, 1e-6, 1e-6));
    const LayerNormGrads glo = layer_norm_backward(g, x, w.to(half), lo.mean, lo.rstd, true,
                                                   true, true);
    const LayerNormGrads ghi = layer_norm_backward(g.to(kF32), x.to(kF32),
                                                   w.to(half).to(kF32), hi.mean, hi.rstd, true,
                                                   true, true);
    EXPECT_EQ(glo.input.dtype(), half);
    EXPECT_EQ(glo.weight.dtype(), kF32);  // the compute type; autograd casts it
    EXPECT_TRUE(allclose(glo.input.to(kF32), ghi.input, 1e-2, 1e-2));
    EXPECT_TRUE(allclose(glo.weight, ghi.weight, 1e-5, 1e-5));
    EXPECT_TRUE(allclose(glo.bias, ghi.bias, 1e-5, 1e-5));
  }
}

TEST(LayerNorm, BadArgumentsAreClearErrors) {
  const Tensor x = random({2, 5}, 14);
  expect_error([&] { layer_norm(x, ones({4}), Tensor()); },
               "layer_norm: weight has shape [4], expected [5]");
  expect_error([&] { layer_norm(x, Tensor(), zeros({5, 1})); }, "bias has shape [5, 1]");
  expect_error([&] { layer_norm(x.to(kI64), Tensor(), Tensor()); }, "floating-point");
  expect_error([&] { layer_norm(x, Tensor(), Tensor(), 0.0); }, "eps must be positive, got 0");
  expect_error([&] { layer_norm(zeros({3, 0}), Tensor(), Tensor()); }, "n > 0");
  const LayerNormResult r = layer_norm(x, Tensor(), Tensor());
  expect_error([&] { layer_norm_backward(zeros({2, 4}), x, Tensor(), r.mean, r.rstd, true, false,
                                         false); },
               "grad shape [2, 4] differs from input shape [2, 5]");
}

// ---------------------------------------------------------------------------- GELU

TEST(Gelu, ValuesWrittenOutByHand) {
  // Computed with Python's math.tanh and math.erf in f64.
  const Tensor x = from_vector<double>({-3, -1, -0.5, 0, 0.5, 1, 2, 3}, {8});
  expect_near_all(gelu(x, GeluApproximate::kTanh),
                  {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                   0.34571400982514394, 0.8411919906082768, 1.954597694087775,
                   2.996362607918227},
                  1e-14, "tanh form");
  expect_near_all(gelu(x, GeluApproximate::kNone),
                  {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
                   0.34573123063700656, 0.8413447460685429, 1.9544997361036416,
                   2.99595030590511},
                  1e-14, "exact form");
  EXPECT_TRUE(allclose(gelu(x), gelu(x, GeluApproximate::kNone), 0, 0));  // PyTorch's default
}

// Both forms and their derivatives in f64 from <cmath>, element by element.
double gelu_formula(double x, GeluApproximate a) {
  if (a == GeluApproximate::kTanh) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

TEST(Gelu, F32MatchesTheFormulaAndBackwardItsDerivative) {
  // Odd count (not a multiple of the kernels' blocks) over [-8, 8], past where tanh saturates.
  const Tensor x = mul(random({3, 1001}, 15), 3.0).to(kF32);
  const Tensor g = random({3, 1001}, 16);
  for (const GeluApproximate a : {GeluApproximate::kTanh, GeluApproximate::kNone}) {
    std::vector<double> y, dx;
    const std::vector<double> xs = values(x), gs = values(g);
    for (size_t i = 0; i < xs.size(); ++i) {
      y.push_back(gelu_formula(xs[i], a));
      // The derivative by central differences in f64 (independent of the closed forms).
      const double h = 1e-6;
      dx.push_back(gs[i] * (gelu_formula(xs[i] + h, a) - gelu_formula(xs[i] - h, a)) / (2 * h));
    }
    expect_near_all(gelu(x, a), y, 1e-6, "gelu");
    expect_near_all(gelu_backward(g, x, a), dx, 1e-5, "gelu_backward");
  }
}

TEST(Gelu, HalfPrecisionRoundsTheF32Result) {
  for (const DType half : {kF16, kBF16}) {
    const Tensor x = random({777}, 17, half), g = random({777}, 18, half);
    for (const GeluApproximate a : {GeluApproximate::kTanh, GeluApproximate::kNone}) {
      EXPECT_TRUE(allclose(gelu(x, a), gelu(x.to(kF32), a).to(half), 0, 0));
      EXPECT_TRUE(allclose(gelu_backward(g, x, a),
                           gelu_backward(g.to(kF32), x.to(kF32), a).to(half), 0, 0));
    }
  }
}

TEST(Gelu, StridedInputAndBadArguments) {
  const Tensor x = random({5, 7}, 19);
  EXPECT_TRUE(allclose(gelu(x.t()), gelu(x).t(), 0, 0));
  expect_error([] { gelu(from_vector<int64_t>({1, 2}, {2})); }, "floating-point");
  expect_error([&] { gelu_backward(zeros({5, 6}), x); },
               "gelu_backward: grad shape [5, 6] differs from input shape [5, 7]");
}

// ---------------------------------------------------------------------------- embedding

TEST(Embedding, ForwardPicksRowsForIndicesOfAnyShape) {
  // weight row v = [10v, 10v + 1, 10v + 2].
  const Tensor w = from_vector<float>({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3});
  const Tensor idx = from_vector<int64_t>({3, 0, 3, 1}, {2, 2});
  const Tensor out = embedding(w, idx);
  EXPECT_EQ(out.shape(), Shape({2, 2, 3}));
  expect_near_all(out, {30, 31, 32, 0, 1, 2, 30, 31, 32, 10, 11, 12}, 0, "rows");
  EXPECT_EQ(embedding(w, from_vector<int64_t>({2}, {})).shape(), Shape({3}));  // a scalar id
  EXPECT_EQ(embedding(w, zeros({0, 5}, kI64)).shape(), Shape({0, 5, 3}));
}

TEST(Embedding, BackwardAddsRowsOfRepeatedIndices) {
  // Token 1 three times, token 3 once; rows 0 and 2 never named.
  const Tensor idx = from_vector<int64_t>({1, 3, 1, 1}, {4});
  const Tensor g = from_vector<float>({1, 2, 10, 20, 100, 200, 1000, 2000}, {4, 2});
  const Tensor dw = embedding_backward(g, idx, 5, kF32);
  EXPECT_EQ(dw.shape(), Shape({5, 2}));
  expect_near_all(dw, {0, 0, 1101, 2202, 0, 0, 10, 20, 0, 0}, 0, "dw");
  // In the weight's dtype, summed in f32 first: 256 + 1 + 1 is 258 (representable in bf16),
  // where bf16 additions one at a time would give 256 (256 + 1 rounds back to 256).
  const Tensor gb = from_vector<float>({256, 1, 1}, {3, 1}).to(kBF16);
  const Tensor db = embedding_backward(gb, from_vector<int64_t>({0, 0, 0}, {3}), 1, kBF16);
  EXPECT_EQ(db.dtype(), kBF16);
  EXPECT_EQ(db.to(kF32).item(), 258.0);
}

TEST(Embedding, BackwardIsTheSameBitsOnAnyThreadCount) {
  Generator gen(20);
  const Tensor idx = uniform({300}, 0, 7, kF64, &gen).to(kI64);  // truncated: [0, 7)
  const Tensor g = random({300, 200}, 21);
  const int before = num_threads();
  set_num_threads(1);
  const Tensor one = embedding_backward(g, idx, 7, kF32);
  set_num_threads(2);
  const Tensor two = embedding_backward(g, idx, 7, kF32);
  set_num_threads(before);
  EXPECT_TRUE(allclose(one, two, 0, 0));
  // And equal to a plain loop in f64.
  std::vector<double> expected(7 * 200, 0.0);
  const std::vector<double> gs = values(g), is = values(idx);
  for (int64_t i = 0; i < 300; ++i) {
    const int64_t row = static_cast<int64_t>(is[i]);
    for (int64_t j = 0; j < 200; ++j) expected[row * 200 + j] += gs[i * 200 + j];
  }
  expect_near_all(one, expected, 1e-5, "dw");
}

TEST(Embedding, BadIndicesAreClearErrors) {
  const Tensor w = zeros({50, 4});
  expect_error([&] { embedding(w, from_vector<int64_t>({3, 50, 7}, {3})); },
               "embedding: index 50 (element 1 of indices with shape [3]) is out of range for "
               "an embedding of V = 50 rows");
  expect_error([&] { embedding(w, from_vector<int64_t>({0, 1, -1, 2}, {2, 2})); },
               "index -1 (element 2 of indices with shape [2, 2])");
  expect_error([&] { embedding(w, from_vector<int64_t>({1}, {1}).to(kI32)); },
               "indices must be i64 (token ids), got i32");
  expect_error([&] { embedding(w, from_vector<int64_t>({1}, {1}).to(kF32)); },
               "indices must be i64");
  expect_error([&] { embedding(zeros({50}), from_vector<int64_t>({1}, {1})); },
               "weight must be [V, C], got shape [50]");
  expect_error([&] { embedding_backward(zeros({3, 4}), from_vector<int64_t>({0, 1}, {2}), 5,
                                        kF32); },
               "grad shape [3, 4] does not match indices shape [2]");
  expect_error([&] { embedding_backward(zeros({1, 4}), from_vector<int64_t>({5}, {1}), 5,
                                        kF32); },
               "index 5 (element 0");
}

}  // namespace
}  // namespace tessera
