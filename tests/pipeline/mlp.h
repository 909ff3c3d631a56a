// The pipeline tests' models: Flatten, then Linear layers of the given widths with a ReLU between
// each pair (widths {64, 32, 10}: Flatten, Linear(64, 32), ReLU, Linear(32, 10)), initialized
// from `seed`, so every rank and every reference builds the same model.
#pragma once

#include <memory>
#include <vector>

#include "nn/nn.h"
#include "tensor/random.h"

namespace tessera {
namespace pipeline {

inline std::shared_ptr<nn::Sequential> mlp_of(uint64_t seed, const std::vector<int64_t>& widths) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
  }
  return m;
}

}  // namespace pipeline
}  // namespace tessera
