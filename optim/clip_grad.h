// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_: if the norm of all
// gradients together exceeds max_norm, every gradient is scaled by max_norm / (norm + 1e-6).
//
// One function serves every layout of a model across ranks (Megatron-LM's get_grad_norm): each
// rank adds the squares of the gradients it *counts*, a reduction sums those over the ranks
// that hold the other parts (the shards of ZeRO, the slices of tensor parallelism, the stages
// of a pipeline), and each rank scales the gradients it *holds* by the same coefficient:
//
//   rank:        counted squares     reduce (sum)           coef = max / (sqrt(total) + 1e-6)
//   0  [w0a b]   |w0a|^2 + |b|^2  ┐
//   1  [w0b b]   |w0b|^2          ┴─> |w0|^2 + |b|^2 ──>    w0a, b *= coef;  w0b, b *= coef
//
// (b replicated on both ranks is counted on one). optim knows no process groups: the reduction
// is a function its caller gives (dist/grad_norm.h makes one from groups), as the GradScaler's
// found-inf reduction is.
#pragma once

#include <functional>
#include <vector>

#include "autograd/variable.h"

namespace tessera {
namespace optim {

// The Euclidean norm of all gradients together (computed in f64; parameters without a gradient
// count as zero). inf or NaN when any gradient element is: the train tool's NaN guard uses it.
double grad_norm(const std::vector<Variable>& params);
// The sum of the squares of the gradients (f64): a rank's part of the squared global norm.
double grad_squared_sum(const std::vector<Variable>& params);
// The same of one gradient tensor, as grad_squared_sum adds it up (a gradient held elsewhere:
// an offloaded ZeRO-3 unit's).
double squared_sum(const Tensor& grad);
// The factor gradients are scaled by for a global norm `total` (PyTorch's max_norm / (total +
// 1e-6)); clipping scales only when it is below 1.
double clip_coefficient(double max_norm, double total);

// Returns the total norm before clipping. norm_type 2 (Euclidean) or infinity. Refuses a
// parameter whose whole gradient is held elsewhere (Variable::grad_held_by: ZeRO's and FSDP's),
// naming the call that clips it.
double clip_grad_norm(const std::vector<Variable>& params, double max_norm, double norm_type = 2.0);

// Sums a rank's squared norm over the ranks that hold the rest of the model (all-reduce).
using SquaredNormReduction = std::function<double(double local_squares)>;

// A model split across ranks: the global 2-norm is sqrt(reduce(squares of `counted`)), and
// every gradient of `held` is scaled by max_norm / (norm + 1e-6) when that is below 1. Every
// rank of the reduction must call it. Returns the global norm before clipping.
double clip_grad_norm(const std::vector<Variable>& held, const std::vector<Variable>& counted,
                      double max_norm, const SquaredNormReduction& reduce);

}  // namespace optim
}  // namespace tessera
