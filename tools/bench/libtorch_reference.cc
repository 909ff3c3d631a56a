// The train_bench steps in LibTorch 1.13 (Debian's libtorch-dev), for side-by-side timings:
// logistic b=64, MLP b=64, CIFAR-style ResNet-20 (option-A shortcuts, 1 input channel, 28x28)
// b=128; SGD with momentum; median ms per step after warm-up, at 1 and 2 threads.
//
//   apt-get install libtorch-dev   (not needed for anything else, so not in tools/setup.sh)
//   bazel build -c opt //tools/bench:libtorch_reference   (tagged manual: not part of //...)
//   bazel-bin/tools/bench/libtorch_reference; bazel-bin/tools/bench/train_bench
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

namespace F = torch::nn::functional;
using torch::indexing::None;
using torch::indexing::Slice;

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
        bn1(out),
        conv2(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)),
        bn2(out),
        in_(in),
        out_(out),
        stride_(stride) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor o = torch::relu(bn1(conv1(x)));
    o = bn2(conv2(o));
    torch::Tensor shortcut = x;
    if (stride_ != 1 || in_ != out_) {  // option A: subsample, pad channels with zeros
      shortcut = x.index({Slice(), Slice(), Slice(None, None, stride_), Slice(None, None, stride_)});
      const int64_t before = (out_ - in_) / 2;
      shortcut = torch::constant_pad_nd(shortcut, {0, 0, 0, 0, before, out_ - in_ - before});
    }
    return torch::relu(o + shortcut);
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::BatchNorm2d bn1, bn2;
  int64_t in_, out_, stride_;
};
TORCH_MODULE(BasicBlock);

torch::nn::Sequential resnet20() {
  torch::nn::Sequential m(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)),
                          torch::nn::BatchNorm2d(16), torch::nn::ReLU());
  int64_t channels = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t width = 16 << stage;
    for (int i = 0; i < 3; ++i) {
      m->push_back(BasicBlock(channels, width, stage > 0 && i == 0 ? 2 : 1));
      channels = width;
    }
  }
  m->push_back(torch::nn::AdaptiveAvgPool2d(1));
  m->push_back(torch::nn::Flatten());
  m->push_back(torch::nn::Linear(64, 10));
  return m;
}

torch::nn::Sequential build(const std::string& name) {
  if (name == "logistic") return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 10));
  if (name == "mlp") {
    return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                                 torch::nn::Linear(256, 10));
  }
  return resnet20();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  struct Case {
    std::string model;
    int64_t batch;
    int warmup, steps;
  };
  const std::vector<Case> cases = {
      {"logistic", 64, 50, 2000}, {"mlp", 64, 20, 500}, {"resnet20", 128, 3, 20}};
  std::printf("LibTorch %s\n%-10s %6s %8s %14s %12s\n", TORCH_VERSION, "model", "batch", "threads",
              "median ms/step", "min ms/step");
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      torch::set_num_threads(threads);
      torch::manual_seed(0);
      auto model = build(c.model);
      torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
      const torch::Tensor x = torch::randn({c.batch, 1, 28, 28});
      const torch::Tensor y = torch::arange(c.batch) % 10;
      std::vector<double> ms;
      for (int i = 0; i < c.warmup + c.steps; ++i) {
        const auto start = std::chrono::steady_clock::now();
        opt.zero_grad();
        F::cross_entropy(model->forward(x), y).backward();
        opt.step();
        const double elapsed =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (i >= c.warmup) ms.push_back(elapsed);
      }
      std::printf("%-10s %6lld %8d %14.3f %12.3f\n", c.model.c_str(), static_cast<long long>(c.batch),
                  threads, median(ms), *std::min_element(ms.begin(), ms.end()));
      std::fflush(stdout);
    }
  }
  return 0;
}
