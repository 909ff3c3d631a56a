// The two forwards of a strategy that runs a whole model (or its ZeRO-3 wrapper) on each rank:
// a training batch's loss under the run's autocast, and evaluation's output under it without a
// graph. Backward runs after the guard has closed (autocast.h), so only forward and loss sit
// inside it; a pipeline interleaves the two and keeps its own guard (pipelined.cc).
#pragma once

#include <functional>

#include "autograd/variable.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

// The model's forward as the strategy runs it (through DDP, ZeRO-3's wrapper, or the model).
using Forward = std::function<Variable(const Variable& input)>;

// criterion(forward(inputs), targets), under autocast: the loss to scale and run backward on.
Variable autocast_loss(const MixedPrecision& precision, const Forward& forward,
                       const Criterion& criterion, const Tensor& inputs, const Tensor& targets);

// forward(inputs) under autocast and without a graph: evaluation's output.
Tensor autocast_predict(const MixedPrecision& precision, const Forward& forward,
                        const Tensor& inputs);

}  // namespace train
}  // namespace tessera
