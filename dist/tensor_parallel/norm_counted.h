// Which gradients a tensor-parallel rank counts in the global gradient norm (Megatron-LM's
// param_is_not_tensor_parallel_duplicate): its slices of the split layers (column-parallel
// weight and bias, row-parallel weight, a vocabulary-parallel embedding's rows) always, every
// other parameter (a row-parallel bias, layers not split, BatchNorm) only on tensor-parallel
// rank 0, since every rank of the group holds the same copy. Summed over the group
// (dist/grad_norm.h), each element counts once.
#pragma once

#include <vector>

#include "autograd/variable.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

// The parameters of `params` (this rank's: all of a model, or a pipeline stage's) that the
// rank `tp_rank` of the tensor-parallel group counts; `model` holds their modules.
std::vector<Variable> norm_counted_parameters(const std::vector<Variable>& params,
                                              nn::Module& model, int tp_rank);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
