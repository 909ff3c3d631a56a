// GPU benchmark (a --config=cuda build on a GPU machine): GEMM TFLOP/s per dtype and the
// ResNet-50 training step (224x224, 3 channels, 1000 classes, SGD with momentum) in images/s,
// at f32 and TF32. tools/bench/pytorch_gpu_reference.py times the same work in PyTorch eager.
//
//   bazel build -c opt --config=cuda //tools/bench:gpu_bench
//   bazel-bin/tools/bench/gpu_bench [--batches=64,128 --steps=N --gemm-n=8192]
//
// Each step ends with the loss read back to the host, so the timings include the whole step.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "models/resnet.h"
#include "optim/sgd.h"
#include "tensor/accelerator.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/median.h"

using namespace tessera;
using bench::median;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// TFLOP/s of an n x n x n product (median of 10 after 3 warm-ups).
double gemm_tflops(int64_t n, DType dtype, const Device& gpu) {
  const Tensor a = randn({n, n}, TensorOptions(dtype).device(gpu));
  const Tensor b = randn({n, n}, TensorOptions(dtype).device(gpu));
  std::vector<double> s;
  for (int i = 0; i < 13; ++i) {
    synchronize(gpu);
    const auto start = Clock::now();
    Tensor c = matmul(a, b);
    synchronize(gpu);
    if (i >= 3) s.push_back(seconds_since(start));
  }
  return 2.0 * n * n * n / median(s) / 1e12;
}

// Images per second of the ResNet-50 training step (median step time).
double resnet50_images_per_second(int64_t batch, int steps, const Device& gpu, int64_t* peak) {
  manual_seed(0);
  auto model = models::ResNet50(3, 1000);
  model->to(gpu);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
  const Tensor x = randn({batch, 3, 224, 224}, gpu);
  const Tensor y = arange(batch, TensorOptions(kI64).device(gpu));
  const Tensor labels = sub(y, mul(div(y, 1000.0).to(kI64), 1000.0)).to(kI64);
  reset_peak(gpu);
  std::vector<double> s;
  for (int i = 0; i < steps + 5; ++i) {
    const auto start = Clock::now();
    opt.zero_grad();
    Variable loss = cross_entropy(model->forward(Variable(x)), labels);
    loss.backward();
    opt.step();
    (void)loss.item();  // waits for the step
    if (i >= 5) s.push_back(seconds_since(start));
  }
  *peak = memory_stats(gpu).peak_bytes;
  return batch / median(s);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> batches = {64, 128};
  int steps = 20;
  int64_t gemm_n = 8192;
  for (int i = 1; i < argc; ++i) {
    const char* v;
    if ((v = bench::flag_value(argv[i], "--batches="))) {
      if (!bench::parse_numbers("gpu_bench", "--batches=", v, int64_t{1}, &batches)) return 2;
    } else if ((v = bench::flag_value(argv[i], "--steps="))) {
      if (!bench::parse_number("gpu_bench", "--steps=", v, 1, &steps)) return 2;
    } else if ((v = bench::flag_value(argv[i], "--gemm-n="))) {
      if (!bench::parse_number("gpu_bench", "--gemm-n=", v, int64_t{1}, &gemm_n)) return 2;
    } else {
      bench::print_unknown_flag("gpu_bench", argv[i], "--batches=64,128 --steps=N --gemm-n=N");
      return 2;
    }
  }
  if (!cuda_is_available()) {
    std::fprintf(stderr, "gpu_bench: no CUDA: %s\n", cuda_unavailable_reason().c_str());
    return 1;
  }
  const Device gpu = Device::cuda(0);
  std::printf("GEMM %lld^3 TFLOP/s:", static_cast<long long>(gemm_n));
  for (DType t : {kF32, kF16, kBF16}) {
    std::printf("  %s %.1f", dtype_name(t), gemm_tflops(gemm_n, t, gpu));
    std::fflush(stdout);
  }
  set_allow_tf32(true);
  std::printf("  tf32 %.1f\n", gemm_tflops(gemm_n, kF32, gpu));
  set_allow_tf32(false);
  std::printf("%-8s %6s %6s %12s %14s\n", "model", "batch", "math", "images/s", "peak MiB");
  for (bool tf32 : {false, true}) {
    set_allow_tf32(tf32);
    for (int64_t b : batches) {
      int64_t peak = 0;
      const double ips = resnet50_images_per_second(b, steps, gpu, &peak);
      std::printf("%-8s %6lld %6s %12.1f %14.0f\n", "resnet50", static_cast<long long>(b),
                  tf32 ? "tf32" : "f32", ips, peak / 1048576.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
