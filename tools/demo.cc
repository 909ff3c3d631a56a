// demo: logistic regression on Fashion-MNIST, trained through tessera's autograd.
//
// Until tools/train exists this is the main job: it reads the real Fashion-MNIST installed by
// tools/setup.sh, trains softmax regression (784 -> 10) with mini-batch SGD and momentum
// written out by hand (the optimizer library comes next), and prints the training loss and
// test accuracy of every epoch. Usage: demo [--epochs=N (default 5)] [--threads=N] [--data=DIR]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "data/mnist.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

using namespace tessera;

namespace {

int parse_int(const std::string& arg, const std::string& flag) {
  const std::string value = arg.substr(flag.size() + 1);
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n <= 0) {
    std::fprintf(stderr, "demo: %s expects a positive integer, got '%s'\n", flag.c_str(),
                 value.c_str());
    std::exit(2);
  }
  return static_cast<int>(n);
}

// u8 [N, 1, 28, 28] -> f32 [N, 784] in [0, 1].
Tensor flatten_images(const Tensor& images) {
  return div(images.reshape({images.size(0), 784}).to(kF32), 255.0);
}

double accuracy(const Tensor& x, const Tensor& y, const Variable& w, const Variable& b) {
  NoGradGuard no_grad;
  const Tensor logits = linear(Variable(x), w, b).data();
  return sum(eq(argmax(logits, 1), y)).item() / static_cast<double>(y.size(0));
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 5;
  std::string root = data::kFashionMnistRoot;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--epochs=", 0) == 0) {
      epochs = parse_int(arg, "--epochs");
    } else if (arg.rfind("--threads=", 0) == 0) {
      set_num_threads(parse_int(arg, "--threads"));
    } else if (arg.rfind("--data=", 0) == 0) {
      root = arg.substr(7);
    } else {
      std::fprintf(stderr, "demo: unknown flag '%s' (flags: --epochs=N --threads=N --data=DIR)\n",
                   arg.c_str());
      return 2;
    }
  }
  try {
    const data::ImageSet train = data::FashionMNIST(root, true);
    const data::ImageSet test = data::FashionMNIST(root, false);
    const Tensor x_train = flatten_images(train.images), y_train = train.labels;
    const Tensor x_test = flatten_images(test.images), y_test = test.labels;
    std::printf("Fashion-MNIST: %lld train, %lld test images; %d threads\n",
                static_cast<long long>(train.size()), static_cast<long long>(test.size()),
                num_threads());

    Variable w(zeros({10, 784}), true), b(zeros({10}), true);
    Tensor vw = zeros({10, 784}), vb = zeros({10});
    const int64_t batch = 128;
    const double base_lr = 0.02, momentum = 0.9;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      // Cosine decay of the learning rate over the run, epoch by epoch.
      const double lr = 0.5 * base_lr * (1 + std::cos(M_PI * (epoch - 1) / epochs));
      // A seeded shuffle of the training set, different every epoch.
      std::vector<int64_t> perm(train.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), std::mt19937_64(1000 + epoch));
      const Tensor order = from_vector<int64_t>(perm, {train.size()});
      const Tensor x_epoch = index_select(x_train, 0, order);
      const Tensor y_epoch = index_select(y_train, 0, order);
      double total_loss = 0;
      int64_t batches = 0;
      for (int64_t at = 0; at + batch <= train.size(); at += batch) {
        const Variable x(x_epoch.narrow(0, at, batch));
        const Tensor y = y_epoch.narrow(0, at, batch);
        Variable loss = cross_entropy(linear(x, w, b), y);
        w.zero_grad();
        b.zero_grad();
        loss.backward();
        // SGD with momentum, as torch.optim.SGD: v = momentum v + g; p -= lr v.
        NoGradGuard no_grad;
        for (auto [p, v] : {std::pair<Variable, Tensor>{w, vw}, {b, vb}}) {
          mul_(v, momentum);
          add_(v, p.grad());
          Tensor data = p.data();
          add_(data, v, -lr);
        }
        total_loss += loss.item();
        ++batches;
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("epoch %d  train_loss %.4f  test_accuracy %.4f  %.0f images/s  %.2f s\n", epoch,
                  total_loss / batches, accuracy(x_test, y_test, w, b),
                  batches * batch / seconds, seconds);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 1;
  }
  return 0;
}
