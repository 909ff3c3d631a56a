// The consensus distance: how far the replicas of a decentralized or local run have drifted
// apart (Kong et al. 2021 relate it to the generalization gap of decentralized training):
//
//   Xi^2 = 1/N sum_i || w_i - w_bar ||^2        w_i: rank i's parameters (all tensors, as one
//                                               vector);  w_bar = 1/N sum_i w_i
//
// Measured exactly, not through the cheaper-looking identity 1/N sum_i ||w_i||^2 - ||w_bar||^2:
// that difference of two large numbers loses every digit when the replicas are close (the case
// that matters), since w_bar itself is rounded to the parameters' precision. Each rank computes
// its own ||w_i - w_bar||^2 in f64 once w_bar is known, and one scalar all-reduce averages them.
//
//   rank 0:  w_0 --.                                  ||w_0 - w_bar||^2 --.
//   rank 1:  w_1 --+-- all-reduce (mean) -> w_bar --> ||w_1 - w_bar||^2 --+-- all-reduce (mean)
//   rank 2:  w_2 --'   psi elements                   ||w_2 - w_bar||^2 --'   1 f64 -> Xi^2
//
// w_bar is computed in the tensors' own dtype (the cheap all-reduce), so identical replicas
// measure the rounding of their mean, about (eps ||w||)^2, not always 0: 1e-13 for a small f32
// MLP on 3 ranks (the sum of three equal f32 values times 1/3 need not give the value back).
//
// Model averaging (PeriodicModelAverager, DiLoCo) has w_bar (or the mean pseudo-gradient) at hand
// already and adds only the scalar all-reduce; consensus_distance() below, for a strategy that
// never averages (D-PSGD), pays the all-reduce of w_bar too.
#pragma once

#include <vector>

#include "dist/process_group.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {

// sum_k || a[k] - b[k] ||^2, accumulated in f64 (the lists pair up: same sizes and shapes).
double squared_distance(const std::vector<Tensor>& a, const std::vector<Tensor>& b);

// Collective. Xi^2 = 1/N sum_i ||w_i - w_bar||^2 over the group, with w_i this rank's `tensors`
// (floating point, the same shapes and dtypes on every rank), on every rank. The tensors are not
// changed. Costs one all-reduce of their elements (one per dtype) and one of an f64 scalar.
double consensus_distance(const std::vector<Tensor>& tensors, ProcessGroup& group);

}  // namespace dist
}  // namespace tessera
