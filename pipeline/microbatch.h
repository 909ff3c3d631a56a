// Micro-batches: a batch of B rows cut into M pieces along dimension 0.
//
//   batch of 10, M = 4     ->  rows 0-2 | 3-5 | 6-7 | 8-9      sizes 3,3,2,2 (differ by <= 1)
//   batch of 3,  M = 4     ->  rows 0 | 1 | 2                  fewer micro-batches: min(M, B)
//
// One gradient-scaling rule makes pipelined gradients equal the unpipelined batch's: the loss
// of micro-batch i (a mean over its n_i rows) is weighted by its share of the batch,
// w_i = n_i / B, so sum_i w_i * mean_i = the mean over the batch, whatever the sizes.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

struct Microbatch {
  Tensor input;   // rows of the batch's input (a view)
  Tensor target;  // the same rows of the target (undefined if the batch has none)
  double weight;  // n_i / B
};

// min(M, B) sizes that differ by at most one, larger first. B >= 1, M >= 1.
std::vector<int64_t> microbatch_sizes(int64_t batch, int microbatches);

// Cuts input (and target, when defined) into micro-batches; their row counts must agree.
std::vector<Microbatch> split_microbatches(const Tensor& input, const Tensor& target,
                                           int microbatches);

}  // namespace pipeline
}  // namespace tessera
