// pipeline_bench's model, balanced by construction: `layers` identical Linear(width, width) +
// ReLU blocks, the first with a Scale in front (pipeline_bench_model.cc says why), so a uniform
// cut gives every stage (and, interleaved, every chunk) about the same work.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/nn.h"

namespace tessera {
namespace bench {

// Seeded (manual_seed(0)), so every rank builds the same parameters.
std::shared_ptr<nn::Sequential> balanced_model(int64_t width, int layers);

}  // namespace bench
}  // namespace tessera
