// Whether a gradient bucket is finite. With fp16 a step's gradients overflow now and then (inf,
// or NaN from inf - inf); the GradScaler then skips the step, and the compression hooks must
// leave their state (error-feedback residuals, PowerSGD's warm start, step counters) as it was.
// They ask this of the summed result, which is the same on every rank, so every rank decides
// alike.
#pragma once

#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace compression {

// True when no entry of the f32 tensor is inf or NaN.
bool all_finite(const Tensor& x);

}  // namespace compression
}  // namespace dist
}  // namespace tessera
