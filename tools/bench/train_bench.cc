// Training-step benchmark: forward + loss + backward + optimizer step on a fixed synthetic
// batch, median (and min) milliseconds per step after warm-up, at 1 and 2 threads, in f32 or
// under autocast, with the bytes the forward leaves for backward.
//
//   bazel run -c opt --config=native //tools/bench:train_bench [-- --models=resnet20 --steps=N
//       --threads=N (1 and 2 by default) --amp=off,bf16,fp16 (off by default) --clock=cpu
//       --param-dtype=f32|bf16|f16]
//
// Shapes as the LibTorch reference figures in issue 3: logistic b=64, MLP b=64, ResNet-20
// b=128 (CIFAR-style, option-A shortcuts, 1 input channel, 28x28), SGD with momentum; and as
// issue 15's PyTorch figures: ImageNet-style ResNet-18 and ResNet-50 at batch 8, 3x224x224,
// 1000 classes (tools/bench/pytorch_cpu_reference.py times the same steps, --amp too;
// side_by_side.sh runs both alternately). --models=resnet18,resnet50 picks them; the default
// runs the first three only, as before.
//
// "activation MiB" is what the forward (and loss) leaves allocated for backward, from the
// counting allocator: bytes in use after the loss minus before the forward, i.e. the saved
// activations (and, under autocast, the parameters' low-precision casts, cached per forward).
// "amp" is the autocast dtype (off: f32 throughout).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "models/resnet.h"
#include "tools/bench/bench_clock.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

using namespace tessera;
using bench::cpu_clock;
using bench::now_ms;

namespace {

struct Case {
  std::string model;
  int64_t batch;
  int warmup, steps;
  int64_t channels = 1, size = 28;  // input image: channels x size x size
  bool by_default = true;           // run without --models
};

std::shared_ptr<nn::Sequential> build(const std::string& name) {
  if (name == "logistic") return models::LogisticRegression();
  if (name == "mlp") return models::MLP();
  if (name == "resnet18") return models::ResNet18(3, 1000);
  if (name == "resnet50") return models::ResNet50(3, 1000);
  return models::ResNet20(1, 10);
}

struct Timing {
  std::vector<double> ms;       // per step after warm-up
  int64_t activation_bytes = 0;  // left by the last step's forward for its backward
};

// amp: "off", "bf16" or "fp16". param_dtype: "f32", or "bf16"/"f16" for parameters kept in that
// dtype between steps (model->to; the optimizer keeps f32 masters, BatchNorm stays f32), so
// autocast has no per-forward casts of the weights to make.
DType param_dtype = kF32;
Timing time_steps(const Case& c, int threads, const std::string& amp) {
  set_num_threads(threads);
  manual_seed(0);
  auto model = build(c.model);
  if (param_dtype != kF32) model->to(param_dtype);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = randn({c.batch, c.channels, c.size, c.size});
  const Tensor y = arange(c.batch, kI64);
  const Tensor labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);  // y mod 10
  Timing t;
  const Device cpu = Device::cpu();
  for (int i = 0; i < c.warmup + c.steps; ++i) {
    const double start = now_ms();
    opt.zero_grad();
    const int64_t before = memory_stats(cpu).current_bytes;
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      if (amp != "off") autocast.emplace(amp == "fp16" ? kF16 : kBF16);
      loss = cross_entropy(model->forward(Variable(x)), labels);
    }
    t.activation_bytes = memory_stats(cpu).current_bytes - before;
    loss.backward();
    opt.step();
    const double elapsed = now_ms() - start;
    if (i >= c.warmup) t.ms.push_back(elapsed);
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  int resnet_steps = 20;
  std::vector<int> thread_counts = {1, 2};
  std::vector<std::string> amps = {"off"};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--models=", 9) == 0) {
      only = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      thread_counts = {std::max(1, std::atoi(argv[i] + 10))};
    } else if (std::strncmp(argv[i], "--param-dtype=", 14) == 0) {
      const std::string d = argv[i] + 14;
      if (d != "f32" && d != "bf16" && d != "f16") {
        std::fprintf(stderr, "train_bench: --param-dtype takes f32, bf16 or f16, got '%s'\n",
                     d.c_str());
        return 2;
      }
      param_dtype = d == "bf16" ? kBF16 : d == "f16" ? kF16 : kF32;
    } else if (std::strcmp(argv[i], "--clock=cpu") == 0) {
      cpu_clock = true;
    } else if (std::strncmp(argv[i], "--steps=", 8) == 0) {
      resnet_steps = std::max(1, std::atoi(argv[i] + 8));
    } else if (std::strncmp(argv[i], "--amp=", 6) == 0) {
      amps.clear();
      std::string list = argv[i] + 6;
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        amps.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
      for (const std::string& a : amps) {
        if (a != "off" && a != "bf16" && a != "fp16") {
          std::fprintf(stderr, "train_bench: --amp takes off, bf16 or fp16 (comma-separated), got '%s'\n",
                       a.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr,
                   "train_bench: unknown flag %s (--models=a,b --steps=N --threads=N --amp=off,bf16,fp16 --param-dtype=f32|bf16|f16 --clock=cpu)\n",
                   argv[i]);
      return 2;
    }
  }
  const std::vector<Case> cases = {{"logistic", 64, 50, 2000},
                                   {"mlp", 64, 20, 500},
                                   {"resnet20", 128, 3, resnet_steps},
                                   {"resnet18", 8, 2, resnet_steps, 3, 224, false},
                                   {"resnet50", 8, 2, resnet_steps, 3, 224, false}};
  std::printf("%-10s %6s %8s %14s %12s %5s %15s\n", "model", "batch", "threads",
              "median ms/step", "min ms/step", "amp", "activation MiB");
  for (const Case& c : cases) {
    if (only.empty() ? !c.by_default : only.find(c.model) == std::string::npos) continue;
    for (int threads : thread_counts) {
      for (const std::string& amp : amps) {
        const Timing t = time_steps(c, threads, amp);
        std::printf("%-10s %6lld %8d %14.3f %12.3f %5s %15.2f\n", c.model.c_str(),
                    static_cast<long long>(c.batch), threads, median(t.ms),
                    *std::min_element(t.ms.begin(), t.ms.end()), amp.c_str(),
                    t.activation_bytes / 1048576.0);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
