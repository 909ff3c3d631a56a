// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_: if the norm of all
// gradients together exceeds max_norm, every gradient is scaled by max_norm / (norm + 1e-6).
#pragma once

#include <vector>

#include "autograd/variable.h"

namespace tessera {
namespace optim {

// The Euclidean norm of all gradients together (computed in f64; parameters without a gradient
// count as zero). inf or NaN when any gradient element is: the train tool's NaN guard uses it.
double grad_norm(const std::vector<Variable>& params);

// Returns the total norm before clipping. norm_type 2 (Euclidean) or infinity.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm, double norm_type = 2.0);

}  // namespace optim
}  // namespace tessera
