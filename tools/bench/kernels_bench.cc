// Kernel benchmarks (Google Benchmark): GEMM and the ResNet-20 convolutions, 1 and 2 threads.
//
//   bazel run -c opt --config=native //tools/bench:kernels_bench
//
// GEMM: C = A B with n x n f32 matrices through tessera's matmul (OpenBLAS sgemm underneath),
// next to Eigen's own product on the same data, in GFLOP/s (2 n^3 flops).
// Conv: forward + backward-input + backward-weight at ResNet-20's shapes (3x3, batch 128,
// 16/32/64 channels on 28x28/14x14/7x7 maps, Fashion-MNIST-sized), GFLOP/s over all three, and
// each pass alone (BM_Conv2dPass).
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace tessera {
namespace {

void BM_Gemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  set_num_threads(static_cast<int>(state.range(1)));
  const Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).raw_data());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)
    ->ArgNames({"n", "threads"})
    ->ArgsProduct({{256, 512, 1024, 2048}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_EigenGemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Eigen::setNbThreads(static_cast<int>(state.range(1)));
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EigenGemm)
    ->ArgNames({"n", "threads"})
    ->ArgsProduct({{1024}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The per-image GEMMs of a 3x3 convolution with C channels on an H x W map:
// pass 0 forward [C, 9C] x [9C, HW], 1 backward-input [9C, C] x [C, HW], 2 backward-weight
// [C, HW] x [HW, 9C], 3 the forward transposed ("im2row") [HW, 9C] x [9C, C].
void BM_ConvGemmShapes(benchmark::State& state) {
  const int64_t c = state.range(0), hw = state.range(1) * state.range(1), which = state.range(2);
  set_num_threads(1);
  int64_t m = which == 1 ? 9 * c : c, n = which == 2 ? 9 * c : hw, k = which == 0 ? 9 * c : which == 1 ? c : hw;
  if (which == 3) {
    m = hw;
    n = c;
    k = 9 * c;
  }
  const Tensor a = randn({m, k}), b = randn({k, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).raw_data());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ConvGemmShapes)
    ->ArgNames({"channels", "hw", "pass"})
    ->ArgsProduct({{16, 32, 64}, {28}, {0, 1, 2, 3}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A ResNet-20 convolution (3x3, padding 1, batch 128): its input, weights and an output
// gradient, and the flops of one pass.
struct ConvCase {
  Conv2dParams p;
  Tensor x, w, g;
  double flops;
  ConvCase(int64_t channels, int64_t hw) {
    const int64_t batch = 128;
    p.padding = {1, 1};
    x = randn({batch, channels, hw, hw});
    w = mul(randn({channels, channels, 3, 3}), 0.1);
    g = randn({batch, channels, hw, hw});
    flops = 2.0 * batch * channels * channels * 9 * hw * hw;
  }
  void forward() const { benchmark::DoNotOptimize(conv2d(x, w, Tensor(), p).raw_data()); }
  void input_gradient() const {
    benchmark::DoNotOptimize(conv2d_backward_input(g, w, x.shape(), p).raw_data());
  }
  void weight_gradient() const {
    benchmark::DoNotOptimize(conv2d_backward_weight(g, x, w.shape(), p).raw_data());
  }
};

void BM_Conv2dForwardBackward(benchmark::State& state) {
  const ConvCase c(state.range(0), state.range(1));
  set_num_threads(static_cast<int>(state.range(2)));
  for (auto _ : state) {
    c.forward();
    c.input_gradient();
    c.weight_gradient();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(3 * c.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv2dForwardBackward)
    ->ArgNames({"channels", "hw", "threads"})
    ->Args({16, 28, 1})
    ->Args({16, 28, 2})
    ->Args({32, 14, 1})
    ->Args({32, 14, 2})
    ->Args({64, 7, 1})
    ->Args({64, 7, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One pass at a time (0 forward, 1 input gradient, 2 weight gradient), at the same shapes.
void BM_Conv2dPass(benchmark::State& state) {
  const ConvCase c(state.range(0), state.range(1));
  const int64_t pass = state.range(2);
  set_num_threads(static_cast<int>(state.range(3)));
  for (auto _ : state) {
    if (pass == 0) c.forward();
    if (pass == 1) c.input_gradient();
    if (pass == 2) c.weight_gradient();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(c.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv2dPass)
    ->ArgNames({"channels", "hw", "pass", "threads"})
    ->ArgsProduct({{16}, {28}, {0, 1, 2}, {1, 2}})
    ->ArgsProduct({{32}, {14}, {0, 1, 2}, {1, 2}})
    ->ArgsProduct({{64}, {7}, {0, 1, 2}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Batch norm in training mode at the same shapes: pass 0 forward (statistics, then the affine
// map), pass 1 backward (two sums, then the input gradient). GB/s counts each pass's minimal
// traffic: forward reads x twice and writes y; backward reads g and x twice and writes dx.
void BM_BatchNorm(benchmark::State& state) {
  const int64_t channels = state.range(0), hw = state.range(1), pass = state.range(2);
  set_num_threads(static_cast<int>(state.range(3)));
  const Tensor x = randn({128, channels, hw, hw}), g = randn({128, channels, hw, hw});
  const Tensor w = randn({channels}), b = randn({channels});
  const Tensor rm = zeros({channels}), rv = ones({channels});
  const BatchNormResult r = batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
  for (auto _ : state) {
    if (pass == 0) {
      benchmark::DoNotOptimize(batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5).output.raw_data());
    } else {
      benchmark::DoNotOptimize(
          batch_norm_backward(g, x, w, r.mean, r.invstd, true, true, true).input.raw_data());
    }
  }
  const double bytes = (pass == 0 ? 3.0 : 5.0) * x.nbytes();
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BatchNorm)
    ->ArgNames({"channels", "hw", "pass", "threads"})
    ->ArgsProduct({{16}, {28}, {0, 1}, {1, 2}})
    ->ArgsProduct({{64}, {7}, {0, 1}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
