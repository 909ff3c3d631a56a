// Training-step benchmark: forward + loss + backward + optimizer step on a fixed synthetic
// batch, median (and min) milliseconds per step after warm-up, at 1 and 2 threads.
//
//   bazel run -c opt --config=native //tools/bench:train_bench [-- --models=resnet20 --steps=N
//       --threads=N (1 and 2 by default)]
//
// Shapes as the LibTorch reference figures in issue 3: logistic b=64, MLP b=64, ResNet-20
// b=128 (CIFAR-style, option-A shortcuts, 1 input channel, 28x28), SGD with momentum; and as
// issue 15's PyTorch figures: ImageNet-style ResNet-18 and ResNet-50 at batch 8, 3x224x224,
// 1000 classes (tools/bench/pytorch_cpu_reference.py times the same steps; side_by_side.sh
// runs both alternately). --models=resnet18,resnet50 picks them; the default runs the first
// three only, as before.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

using namespace tessera;

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

// Returns the step times in milliseconds.
std::vector<double> time_steps(const Case& c, int threads) {
  set_num_threads(threads);
  manual_seed(0);
  auto model = build(c.model);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = randn({c.batch, c.channels, c.size, c.size});
  const Tensor y = arange(c.batch, kI64);
  const Tensor labels = sub(y, mul(div(y, 10.0).to(kI64), 10.0)).to(kI64);  // y mod 10
  std::vector<double> ms;
  for (int i = 0; i < c.warmup + c.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    cross_entropy(model->forward(Variable(x)), labels).backward();
    opt.step();
    const double elapsed =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= c.warmup) ms.push_back(elapsed);
  }
  return ms;
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
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--models=", 9) == 0) {
      only = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      thread_counts = {std::max(1, std::atoi(argv[i] + 10))};
    } else if (std::strncmp(argv[i], "--steps=", 8) == 0) {
      resnet_steps = std::max(1, std::atoi(argv[i] + 8));
    } else {
      std::fprintf(stderr, "train_bench: unknown flag %s (--models=a,b --steps=N --threads=N)\n",
                   argv[i]);
      return 2;
    }
  }
  const std::vector<Case> cases = {{"logistic", 64, 50, 2000},
                                   {"mlp", 64, 20, 500},
                                   {"resnet20", 128, 3, resnet_steps},
                                   {"resnet18", 8, 2, resnet_steps, 3, 224, false},
                                   {"resnet50", 8, 2, resnet_steps, 3, 224, false}};
  std::printf("%-10s %6s %8s %14s %12s\n", "model", "batch", "threads", "median ms/step",
              "min ms/step");
  for (const Case& c : cases) {
    if (only.empty() ? !c.by_default : only.find(c.model) == std::string::npos) continue;
    for (int threads : thread_counts) {
      const std::vector<double> ms = time_steps(c, threads);
      std::printf("%-10s %6lld %8d %14.3f %12.3f\n", c.model.c_str(),
                  static_cast<long long>(c.batch), threads, median(ms),
                  *std::min_element(ms.begin(), ms.end()));
      std::fflush(stdout);
    }
  }
  return 0;
}
