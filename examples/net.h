// The small CNN the examples train on Fashion-MNIST: a user-defined module, which needs only a
// constructor that registers its layers and forward().
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "tessera.h"

namespace example {

using namespace tessera;

struct Net : nn::Module {
  Net() {
    using nn::Conv2dOptions;
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(Conv2dOptions(1, 16, 3).padding(1)));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(16));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(Conv2dOptions(16, 32, 3).padding(1)));
    pool = register_module("pool", std::make_shared<nn::MaxPool2d>(nn::Pool2dOptions(2)));
    fc = register_module("fc", std::make_shared<nn::Linear>(32 * 7 * 7, 10));
  }
  Variable forward(const Variable& x) override {
    Variable h = pool->forward(relu(bn1->forward(conv1->forward(x))));  // 16 x 14 x 14
    h = pool->forward(relu(conv2->forward(h)));                          // 32 x 7 x 7
    return fc->forward(flatten(h, 1));
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::MaxPool2d> pool;
  std::shared_ptr<nn::Linear> fc;
};

// --steps=N stops each epoch after N batches (CI runs the examples this way); 0 runs them all.
inline int64_t steps_flag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--steps=", 8) != 0) {
      std::fprintf(stderr, "unknown argument '%s' (expected --steps=N)\n", argv[i]);
      std::exit(2);
    }
    char* end = nullptr;
    const long long n = std::strtoll(argv[i] + 8, &end, 10);
    if (*end != '\0' || n < 0) {
      std::fprintf(stderr, "--steps: expected a count >= 0, got '%s'\n", argv[i] + 8);
      std::exit(2);
    }
    return n;
  }
  return 0;
}

}  // namespace example
