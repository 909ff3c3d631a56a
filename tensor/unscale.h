// Gradient unscaling for dynamic loss scaling: PyTorch's
// _amp_foreach_non_finite_check_and_unscale_, the one kernel GradScaler needs.
//
// The loss was multiplied by S before backward, so every gradient is S times too large. One
// pass over each gradient multiplies it by inv_scale = 1/S in place and notes whether any
// element is inf or NaN (an overflow somewhere in the scaled backward, or a genuinely bad
// step). found_inf is an f32 tensor of one element that the pass sets to 1 when it sees one and
// otherwise leaves alone, so one flag can collect many calls (and, reduced with MAX, many
// ranks). The multiplication runs in f32 (f64 for f64 gradients) and rounds once.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace tessera {

// grads: floating tensors, any mix of dtypes, all on found_inf's device (f32, one element).
void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                   double inv_scale);

}  // namespace tessera
