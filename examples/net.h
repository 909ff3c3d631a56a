// The small CNN the examples train on Fashion-MNIST: a user-defined module, which needs only
// forward() and its layers, each declared, named and registered in one line (register_module<M>),
// and called as (*layer)(x), which runs the layer's forward hooks as PyTorch's layer(x) does.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "tessera.h"

namespace example {

using namespace tessera;

struct Net : nn::Module {
  Variable forward(const Variable& x) override {
    Variable h = (*pool)(relu((*bn1)((*conv1)(x))));  // 16 x 14 x 14
    h = (*pool)(relu((*conv2)(h)));                    // 32 x 7 x 7
    return (*fc)(flatten(h, 1));
  }
  std::shared_ptr<nn::Conv2d> conv1 = register_module<nn::Conv2d>("conv1", nn::Conv2dOptions(1, 16, 3).padding(1));
  std::shared_ptr<nn::BatchNorm2d> bn1 = register_module<nn::BatchNorm2d>("bn1", 16);
  std::shared_ptr<nn::Conv2d> conv2 = register_module<nn::Conv2d>("conv2", nn::Conv2dOptions(16, 32, 3).padding(1));
  std::shared_ptr<nn::MaxPool2d> pool = register_module<nn::MaxPool2d>("pool", nn::Pool2dOptions(2));
  std::shared_ptr<nn::Linear> fc = register_module<nn::Linear>("fc", 32 * 7 * 7, 10);
};

inline int64_t steps_flag(int argc, char** argv) {
  if (argc < 2) return 0;
  char* end = nullptr;
  const bool flag = argc == 2 && std::strncmp(argv[1], "--steps=", 8) == 0;
  const long long n = flag ? std::strtoll(argv[1] + 8, &end, 10) : -1;
  if (n < 0 || *end != '\0' || argv[1][8] == '\0') {
    std::fprintf(stderr, "expected --steps=N (a count >= 0), got '%s'\n", argv[argc - 1]);
    std::exit(2);
  }
  return n;
}

}  // namespace example
