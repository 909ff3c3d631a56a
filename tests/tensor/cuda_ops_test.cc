// Every tensor op on CUDA against the same op on the CPU, on fresh random inputs, per dtype
// (f32 ~1e-5 relative, TF32 ~1e-3, f16/bf16 ~1e-2). Skips, naming the reason, when this binary
// has no CUDA backend or the machine has no GPU.
#include <gtest/gtest.h>

#include <limits>

#include "tensor/accelerator.h"
#include "tensor/allocator.h"
#include "tensor/fused_updates.h"
#include "tensor/ops.h"
#include "tensor/unscale.h"
#include "tests/tensor/cuda_compare.h"

namespace tessera {
namespace {

// The fixture, tolerances and comparison shared with the other CUDA tests (cuda_compare.h).
using CudaOps = testing::CudaTest;
using testing::expect_close;
using testing::kFloatTypes;
using testing::random_cpu;
using testing::tolerance;

TEST_F(CudaOps, CopiesBetweenDevicesKeepValuesAndLayout) {
  const Tensor x = random_cpu({3, 4, 5}, kF32, 1);
  const Tensor g = x.to(gpu);
  EXPECT_EQ(g.device(), gpu);
  EXPECT_TRUE(allclose(g.cpu(), x, 0, 0));
  // Strided both ways: a transposed view up, a permuted view down.
  expect_close(x.transpose(0, 2).to(gpu), x.transpose(0, 2).contiguous(), 0, "strided H2D");
  expect_close(g.permute({2, 0, 1}).contiguous(), x.permute({2, 0, 1}).contiguous(), 0,
               "strided D2D");
  // Converting on the device, and into a strided destination.
  for (DType t : kFloatTypes) expect_close(g.to(t), x.to(t), 0, "convert");
  expect_close(g.to(kI64), x.to(kI64), 0, "to i64");
  Tensor dst = zeros({5, 4, 3}, gpu);
  Tensor view = dst.permute({2, 1, 0});
  view.copy_(x);
  expect_close(dst, x.permute({2, 1, 0}).contiguous(), 0, "copy_ into a view");
}

TEST_F(CudaOps, PinnedMemoryCopiesAsynchronouslyAndCountsAsCpu) {
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  const Tensor x = random_cpu({1000}, kF32, 2);
  const Tensor pinned = x.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_FALSE(x.is_pinned());
  EXPECT_GE(memory_stats(Device::cpu()).current_bytes - before, 2 * 4000);
  expect_close(pinned.to(gpu), x, 0, "from pinned");
}

TEST_F(CudaOps, CachingAllocatorCountsTensorBytesAndReusesBlocks) {
  synchronize(gpu);
  const MemoryStats start = memory_stats(gpu);
  {
    Tensor a = empty({1000}, TensorOptions(kF32).device(gpu));
    EXPECT_EQ(memory_stats(gpu).current_bytes - start.current_bytes, 4000);
  }
  EXPECT_EQ(memory_stats(gpu).current_bytes, start.current_bytes);
  reset_peak(gpu);
  Tensor b = empty({1000}, TensorOptions(kF32).device(gpu));
  Tensor c = empty({250, 4}, TensorOptions(kF32).device(gpu));
  EXPECT_EQ(memory_stats(gpu).peak_bytes - start.current_bytes, 8000);
}

TEST_F(CudaOps, ElementwiseMatchesCpuWithBroadcasting) {
  for (DType t : kFloatTypes) {
    const Tensor a = random_cpu({4, 1, 6}, t, 3), b = random_cpu({5, 1}, t, 4);
    const Tensor pa = random_cpu({4, 5, 6}, t, 5, 0.1, 3);
    const Tensor ga = a.to(gpu), gb = b.to(gpu), gpa = pa.to(gpu);
    const double tol = tolerance(t);
    expect_close(ga + gb, a + b, tol, "add");
    expect_close(ga - gb, a - b, tol, "sub");
    expect_close(ga * gb, a * b, tol, "mul");
    expect_close(ga / (gb + 3.0), a / (b + 3.0), tol, "div");
    expect_close(maximum(ga, gb), maximum(a, b), tol, "maximum");
    expect_close(pow(gpa, 1.5), pow(pa, 1.5), tol, "pow");
    expect_close(lt(ga, gb), lt(a, b), 0, "lt");
    expect_close(where(gt(ga, gb), ga, gb), where(gt(a, b), a, b), tol, "where");
    expect_close(exp(ga), exp(a), tol, "exp");
    expect_close(log(gpa), log(pa), tol, "log");
    expect_close(sqrt(gpa), sqrt(pa), tol, "sqrt");
    expect_close(tanh(ga), tanh(a), tol, "tanh");
    expect_close(sigmoid(ga), sigmoid(a), tol, "sigmoid");
    expect_close(relu(ga), relu(a), tol, "relu");
    expect_close(clamp(ga, -0.5, 0.5), clamp(a, -0.5, 0.5), tol, "clamp");
    expect_close(relu_backward(gpa, ga.expand({4, 5, 6})), relu_backward(pa, a.expand({4, 5, 6})),
                 tol, "relu_backward");
  }
  const Tensor i = from_vector<int64_t>({-3, 0, 7, 12}, {4});
  expect_close(i.to(gpu) * 3.0, i * 3.0, 0, "i64 mul");
  expect_close(abs(i.to(gpu)), abs(i), 0, "i64 abs");
}

TEST_F(CudaOps, ReductionsMatchCpu) {
  for (DType t : kFloatTypes) {
    const Tensor x = random_cpu({6, 7, 300}, t, 6);
    const Tensor g = x.to(gpu);
    const double tol = tolerance(t);
    expect_close(sum(g), sum(x), tol, "sum all");
    expect_close(sum(g, {1}), sum(x, {1}), tol, "sum dim 1");
    expect_close(mean(g, {0, 2}, true), mean(x, {0, 2}, true), tol, "mean");
    expect_close(amax(g, {2}), amax(x, {2}), tol, "amax");
    expect_close(amin(g, {0}), amin(x, {0}), tol, "amin");
    expect_close(var(g, {2}), var(x, {2}), t == kF32 ? 1e-4 : tol, "var");
    expect_close(argmax(g, 2), argmax(x, 2), 0, "argmax");
    expect_close(argmin(g, 1), argmin(x, 1), 0, "argmin");
  }
  const Tensor i = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_close(sum(i.to(gpu), {1}), sum(i, {1}), 0, "i64 sum");
  const Tensor flags = from_vector<uint8_t>({1, 0, 1, 1}, {4}).to(kBool);
  expect_close(sum(flags.to(gpu)), sum(flags), 0, "bool sum");
}

TEST_F(CudaOps, SoftmaxAndBackwardMatchCpu) {
  for (DType t : kFloatTypes) {
    const Tensor x = random_cpu({5, 37}, t, 7, -6, 6), g = random_cpu({5, 37}, t, 8);
    const double tol = tolerance(t);
    const Tensor y = softmax(x, 1), ly = log_softmax(x, 1);
    expect_close(softmax(x.to(gpu), 1), y, tol, "softmax");
    expect_close(log_softmax(x.to(gpu), 1), ly, tol, "log_softmax");
    expect_close(softmax_backward(g.to(gpu), y.to(gpu), 1), softmax_backward(g, y, 1), tol,
                 "softmax_backward");
    expect_close(log_softmax_backward(g.to(gpu), ly.to(gpu), 1), log_softmax_backward(g, ly, 1),
                 tol, "log_softmax_backward");
    expect_close(softmax(x.to(gpu), 0), softmax(x, 0), tol, "softmax dim 0");
  }
}

TEST_F(CudaOps, FusedCrossEntropyMatchesCpu) {
  const Tensor target = from_vector<int64_t>({3, 0, 9, 9, 1, 5}, {6});
  for (DType t : kFloatTypes) {
    const double tol = tolerance(t);
    const Tensor x = random_cpu({6, 10}, t, 30, -5, 5), g = random_cpu({6}, t, 31);
    for (double eps : {0.0, 0.1}) {
      const CrossEntropyRows r = cross_entropy_rows(x, target, eps);
      const CrossEntropyRows gr = cross_entropy_rows(x.to(gpu), target.to(gpu), eps);
      expect_close(gr.loss, r.loss, tol, "cross_entropy loss");
      expect_close(gr.log_probs, r.log_probs, tol, "cross_entropy log_probs");
      expect_close(cross_entropy_rows_backward(gr.log_probs, target.to(gpu), g.to(gpu), eps),
                   cross_entropy_rows_backward(r.log_probs, target, g, eps), tol,
                   "cross_entropy backward");
    }
  }
  EXPECT_THROW(cross_entropy_rows(zeros({2, 3}, gpu), from_vector<int64_t>({0, 3}, {2}).to(gpu)),
               Error);
}

TEST_F(CudaOps, MatmulMatchesCpuForEveryLayout) {
  for (DType t : kFloatTypes) {
    const Tensor a = random_cpu({33, 20}, t, 9), b = random_cpu({20, 17}, t, 10);
    const Tensor bt = random_cpu({17, 20}, t, 11);
    const Tensor batched_a = random_cpu({3, 8, 20}, t, 12);
    // f16/bf16 inputs are rounded, and their products accumulate 20 terms.
    const double tol = t == kF32 ? 1e-5 : tolerance(t) * 2;
    expect_close(matmul(a.to(gpu), b.to(gpu)), matmul(a, b), tol, "matmul");
    expect_close(matmul(a.to(gpu), bt.to(gpu).t()), matmul(a, bt.t()), tol, "matmul b^T");
    expect_close(matmul(a.to(gpu).t().contiguous().t(), b.to(gpu)), matmul(a, b), tol,
                 "matmul a as transposed view");
    expect_close(matmul(batched_a.to(gpu), b.to(gpu)), matmul(batched_a, b), tol, "batched");
  }
  set_allow_tf32(true);
  const Tensor a = random_cpu({64, 64}, kF32, 13), b = random_cpu({64, 64}, kF32, 14);
  expect_close(matmul(a.to(gpu), b.to(gpu)), matmul(a, b), 1e-2, "tf32");
  set_allow_tf32(false);
}

TEST_F(CudaOps, ConvolutionForwardAndBackwardMatchCpu) {
  struct Case {
    Conv2dParams p;
    int64_t c_in, c_out;
  };
  Conv2dParams strided;
  strided.stride = {2, 2};
  strided.padding = {1, 1};
  Conv2dParams dilated_grouped;
  dilated_grouped.padding = {2, 2};
  dilated_grouped.dilation = {2, 2};
  dilated_grouped.groups = 2;
  for (const Case& c : {Case{strided, 3, 8}, Case{dilated_grouped, 4, 6}}) {
    for (DType t : {kF32, kF16}) {
      const Tensor x = random_cpu({2, c.c_in, 9, 10}, t, 15);
      const Tensor w = random_cpu({c.c_out, c.c_in / c.p.groups, 3, 3}, t, 16);
      const Tensor bias = random_cpu({c.c_out}, t, 17);
      const Tensor y = conv2d(x, w, bias, c.p);
      const Tensor g = random_cpu(y.shape(), t, 18);
      const double tol = t == kF32 ? 1e-4 : 3e-2;
      expect_close(conv2d(x.to(gpu), w.to(gpu), bias.to(gpu), c.p), y, tol, "conv2d");
      expect_close(conv2d_backward_input(g.to(gpu), w.to(gpu), x.shape(), c.p),
                   conv2d_backward_input(g, w, x.shape(), c.p), tol, "conv2d backward input");
      expect_close(conv2d_backward_weight(g.to(gpu), x.to(gpu), w.shape(), c.p),
                   conv2d_backward_weight(g, x, w.shape(), c.p), tol, "conv2d backward weight");
    }
  }
}

TEST_F(CudaOps, PoolingAndBatchNormMatchCpu) {
  for (DType t : kFloatTypes) {
    const double tol = tolerance(t);
    const Tensor x = random_cpu({2, 3, 9, 8}, t, 19);
    Pool2dParams p;
    p.kernel = {3, 3};
    p.stride = {2, 2};
    p.padding = {1, 1};
    const auto [y, idx] = max_pool2d_with_indices(x, p);
    const auto [gy, gidx] = max_pool2d_with_indices(x.to(gpu), p);
    expect_close(gy, y, tol, "max_pool2d");
    expect_close(gidx, idx, 0, "max_pool2d indices");
    const Tensor g = random_cpu(y.shape(), t, 20);
    expect_close(max_pool2d_backward(g.to(gpu), gidx, x.shape()),
                 max_pool2d_backward(g, idx, x.shape()), tol, "max_pool2d backward");
    expect_close(avg_pool2d(x.to(gpu), p), avg_pool2d(x, p), tol, "avg_pool2d");
    expect_close(avg_pool2d_backward(g.to(gpu), x.shape(), p), avg_pool2d_backward(g, x.shape(), p),
                 tol, "avg_pool2d backward");
    expect_close(adaptive_avg_pool2d(x.to(gpu), {2, 3}), adaptive_avg_pool2d(x, {2, 3}), tol,
                 "adaptive_avg_pool2d");
    const Tensor ga = random_cpu({2, 3, 2, 3}, t, 21);
    expect_close(adaptive_avg_pool2d_backward(ga.to(gpu), x.shape()),
                 adaptive_avg_pool2d_backward(ga, x.shape()), tol, "adaptive backward");

    const DType stat = t == kF64 ? kF64 : kF32;
    const Tensor w = random_cpu({3}, stat, 22), b = random_cpu({3}, stat, 23);
    Tensor rm = zeros({3}, stat), rv = ones({3}, stat);
    Tensor grm = rm.to(gpu), grv = rv.to(gpu);
    for (bool training : {true, false}) {
      const BatchNormResult r = batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5);
      const BatchNormResult gr =
          batch_norm(x.to(gpu), w.to(gpu), b.to(gpu), grm, grv, training, 0.1, 1e-5);
      expect_close(gr.output, r.output, tol * 10, "batch_norm");
      expect_close(grm, rm, tol, "running mean");
      expect_close(grv, rv, tol, "running var");
      const Tensor go = random_cpu(x.shape(), t, 24);
      const BatchNormGrads d = batch_norm_backward(go, x, w, r.mean, r.invstd, training, true, true);
      const BatchNormGrads gd = batch_norm_backward(go.to(gpu), x.to(gpu), w.to(gpu), gr.mean,
                                                    gr.invstd, training, true, true);
      expect_close(gd.input, d.input, tol * 10, "batch_norm backward input");
      expect_close(gd.weight, d.weight, tol * 10, "batch_norm backward weight");
      expect_close(gd.bias, d.bias, tol * 10, "batch_norm backward bias");

      // Batch norm + ReLU + residual (the CUDA backend's is Backend's default composition).
      const Tensor res = random_cpu(x.shape(), t, 25);
      const BatchNormResult f = batch_norm_relu(x, w, b, res, Tensor(), Tensor(), true, 0.1, 1e-5);
      const BatchNormResult gf = batch_norm_relu(x.to(gpu), w.to(gpu), b.to(gpu), res.to(gpu),
                                                 Tensor(), Tensor(), true, 0.1, 1e-5);
      expect_close(gf.output, f.output, tol * 10, "batch_norm_relu");
      // The CPU's output is the mask on both sides, so a value rounded to either side of 0
      // cannot make them differ.
      const BatchNormReluGrads fd = batch_norm_relu_backward(go, f.output, x, w, f.mean, f.invstd,
                                                             training, true, true, true);
      const BatchNormReluGrads gfd =
          batch_norm_relu_backward(go.to(gpu), f.output.to(gpu), x.to(gpu), w.to(gpu), gf.mean,
                                   gf.invstd, training, true, true, true);
      expect_close(gfd.input, fd.input, tol * 10, "batch_norm_relu backward input");
      expect_close(gfd.weight, fd.weight, tol * 10, "batch_norm_relu backward weight");
      expect_close(gfd.bias, fd.bias, tol * 10, "batch_norm_relu backward bias");
      expect_close(gfd.residual, fd.residual, 0, "batch_norm_relu backward residual");
    }
  }
}

TEST_F(CudaOps, IndexingJoiningAndSplittingMatchCpu) {
  const Tensor x = random_cpu({4, 5, 3}, kF32, 25);
  const Tensor idx = from_vector<int64_t>({4, 0, 2, 2}, {4});
  expect_close(index_select(x.to(gpu), 1, idx.to(gpu)), index_select(x, 1, idx), 0,
               "index_select");
  const Tensor gidx = from_vector<int64_t>({0, 4, 1, 1, 3, 2, 0, 0}, {4, 2, 1});
  expect_close(gather(x.to(gpu), 1, gidx.to(gpu)), gather(x, 1, gidx), 0, "gather");
  const Tensor src = random_cpu({4, 2, 1}, kF32, 26);
  expect_close(scatter_add(x.to(gpu), 1, gidx.to(gpu), src.to(gpu)), scatter_add(x, 1, gidx, src),
               1e-6, "scatter_add");
  const Tensor y = random_cpu({4, 2, 3}, kF32, 27);
  expect_close(cat({x.to(gpu), y.to(gpu)}, 1), cat({x, y}, 1), 0, "cat");
  const std::vector<Tensor> parts = split(x.to(gpu), 2, 1);
  ASSERT_EQ(parts.size(), 3u);
  expect_close(parts[2].contiguous(), x.narrow(1, 4, 1).contiguous(), 0, "split");
  const Tensor labels = from_vector<int64_t>({3, 0, 1}, {3});
  expect_close(one_hot(labels.to(gpu), 4), one_hot(labels, 4), 0, "one_hot");
  EXPECT_THROW(index_select(x.to(gpu), 1, from_vector<int64_t>({5}, {1}).to(gpu)), Error);
}

TEST_F(CudaOps, RandomNumbersEqualTheCpuStream) {
  for (DType t : kFloatTypes) {
    Generator a(42), b(42);
    const Tensor cpu_u = uniform({1001}, -1, 3, t, &a);
    const Tensor gpu_u = uniform({1001}, -1, 3, TensorOptions(t).device(gpu), &b);
    expect_close(gpu_u, cpu_u, 1e-6, "uniform");
    const Tensor cpu_n = normal({999}, 0.5, 2, t, &a);
    const Tensor gpu_n = normal({999}, 0.5, 2, TensorOptions(t).device(gpu), &b);
    // Device and host libm may differ in the last bit of log/cos, which can move a 16-bit
    // rounding by one step.
    expect_close(gpu_n, cpu_n, t == kF64 ? 1e-9 : tolerance(t), "normal");
  }
}

TEST_F(CudaOps, FusedOptimizerUpdatesMatchCpu) {
  for (DType t : {kF32, kF64}) {
    Tensor p = random_cpu({257}, t, 28), g = random_cpu({257}, t, 29);
    Tensor m = zeros({257}, t), v = zeros({257}, t), vmax = zeros({257}, t);
    Tensor gp = p.to(gpu), gg = g.to(gpu), gm = m.to(gpu), gv = v.to(gpu), gvmax = vmax.to(gpu);
    AdamUpdate u;
    u.lr = 0.01;
    u.weight_decay = 0.1;
    u.amsgrad = true;
    for (int64_t step = 1; step <= 3; ++step) {
      u.step = step;
      adam_update_(p, g, m, v, vmax, u);
      adam_update_(gp, gg, gm, gv, gvmax, u);
    }
    expect_close(gp, p, tolerance(t) * 10, "adam param");
    expect_close(gvmax, vmax, tolerance(t) * 10, "adam vmax");
    Tensor buf = zeros({257}, t), gbuf = buf.to(gpu);
    SgdUpdate s;
    s.lr = 0.1;
    s.momentum = 0.9;
    s.nesterov = true;
    s.first_step = true;
    sgd_update_(p, g, buf, s);
    sgd_update_(gp, gg, gbuf, s);
    s.first_step = false;
    sgd_update_(p, g, buf, s);
    sgd_update_(gp, gg, gbuf, s);
    expect_close(gp, p, tolerance(t) * 10, "sgd param");
  }
}

// The multi-tensor launches: 30 tensors (more than one launch holds), one of them spanning
// several chunks, against the CPU's one-by-one updates.
TEST_F(CudaOps, MultiTensorUpdatesMatchCpu) {
  std::vector<AdamTensors> cpu_adam, gpu_adam;
  std::vector<SgdTensors> cpu_sgd, gpu_sgd;
  for (int i = 0; i < 30; ++i) {
    const int64_t n = i == 7 ? 200000 : 1 + 37 * i;
    const Tensor p = random_cpu({n}, kF32, 100 + i), g = random_cpu({n}, kF32, 200 + i);
    cpu_adam.push_back({p.clone(), g, zeros({n}), zeros({n}), zeros({n})});
    gpu_adam.push_back({p.clone().to(gpu), g.to(gpu), zeros({n}, gpu), zeros({n}, gpu), zeros({n}, gpu)});
    cpu_sgd.push_back({p.clone(), g, zeros({n})});
    gpu_sgd.push_back({p.clone().to(gpu), g.to(gpu), zeros({n}, gpu)});
  }
  AdamUpdate a;
  a.lr = 0.01;
  a.amsgrad = true;
  a.weight_decay = 0.01;
  a.decoupled_weight_decay = true;
  SgdUpdate s;
  s.lr = 0.1;
  s.momentum = 0.9;
  for (int64_t step = 1; step <= 2; ++step) {
    a.step = step;
    s.first_step = step == 1;
    adam_update_many_(cpu_adam, a);
    adam_update_many_(gpu_adam, a);
    sgd_update_many_(cpu_sgd, s);
    sgd_update_many_(gpu_sgd, s);
  }
  for (size_t i = 0; i < cpu_adam.size(); ++i) {
    expect_close(gpu_adam[i].param, cpu_adam[i].param, 1e-5, "adam many: param");
    expect_close(gpu_adam[i].max_exp_avg_sq, cpu_adam[i].max_exp_avg_sq, 1e-5, "adam many: vmax");
    expect_close(gpu_sgd[i].param, cpu_sgd[i].param, 1e-5, "sgd many: param");
    expect_close(gpu_sgd[i].momentum_buffer, cpu_sgd[i].momentum_buffer, 1e-5, "sgd many: buf");
  }
}

TEST_F(CudaOps, MixingDevicesIsAClearError) {
  const Tensor a = ones({3});
  const Tensor b = ones({3}, gpu);
  try {
    add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ones({3}, Device::cuda(15)), Error);
}

TEST_F(CudaOps, NonFiniteCheckAndUnscaleMatchesTheCpu) {
  for (DType t : kFloatTypes) {
    // Many tensors of uneven sizes, so the multi-tensor launches split tensors across blocks.
    std::vector<Tensor> cpu, cuda;
    for (int i = 0; i < 30; ++i) {
      cpu.push_back(random_cpu({1000 * i + 7}, t, 100 + i));
      cuda.push_back(cpu.back().to(gpu));
    }
    Tensor found_cpu = zeros({1}), found_cuda = zeros({1}, TensorOptions(kF32).device(gpu));
    non_finite_check_and_unscale_(cpu, found_cpu, 0.125);
    non_finite_check_and_unscale_(cuda, found_cuda, 0.125);
    for (size_t i = 0; i < cpu.size(); ++i) expect_close(cuda[i], cpu[i], 0, "unscaled");
    EXPECT_EQ(found_cuda.cpu().item(), 0.0);
    Tensor(cuda[17].narrow(0, 5000, 1)).fill_(std::numeric_limits<double>::quiet_NaN());
    non_finite_check_and_unscale_(cuda, found_cuda, 1.0);
    EXPECT_EQ(found_cuda.cpu().item(), 1.0) << t;
  }
}

}  // namespace
}  // namespace tessera
