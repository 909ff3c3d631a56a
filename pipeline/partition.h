// Partition: cut one Sequential into pipeline stages by a balance (balance.h).
//
//   model (built on every rank from one seed)   [ l0 l1 l2 | l3 l4 l5 l6 | l7 l8 l9 ]
//   balance 3,4,3                                 stage 0    stage 1       stage 2
//
// A stage is Sequential::slice() of the same model: it shares the layers (their parameters
// keep their full-model names, "3.weight"), so a seed fixes the initial model whatever the
// number of stages, and a stage's parameters can be compared with the unpipelined model's.
// With v model chunks per rank (interleaved 1F1B) the model is cut into K*v parts and rank s
// takes parts s, s+K, s+2K, ...
#pragma once

#include <memory>
#include <vector>

#include "nn/sequential.h"

namespace tessera {
namespace pipeline {

// One Sequential per entry of `balance` (checked against model.size()).
std::vector<std::shared_ptr<nn::Sequential>> partition(const nn::Sequential& model,
                                                       const std::vector<int>& balance);

// The parts rank `rank` of `ranks` runs: parts[rank], parts[rank + ranks], ...
std::vector<std::shared_ptr<nn::Sequential>> parts_of_rank(
    const std::vector<std::shared_ptr<nn::Sequential>>& parts, int rank, int ranks);

}  // namespace pipeline
}  // namespace tessera
