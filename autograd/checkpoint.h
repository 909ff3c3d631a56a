// Activation checkpointing: trade compute for memory.
//
// checkpoint(fn, inputs) runs fn without recording a graph, so none of fn's intermediate
// activations are kept; only the inputs are. When the gradient of the outputs arrives, fn runs
// again with grad enabled on detached copies of the inputs (replaying the random stream, so
// dropout masks match, and re-entering the autocast settings of the first run, so the dtypes
// match) and backward runs through that fresh graph. Parameters used inside fn
// receive their gradients from that inner backward, hooks included.
#pragma once

#include <functional>
#include <vector>

#include "autograd/variable.h"

namespace tessera {

using CheckpointFn = std::function<std::vector<Variable>(const std::vector<Variable>&)>;

std::vector<Variable> checkpoint(const CheckpointFn& fn, const std::vector<Variable>& inputs);
Variable checkpoint(const std::function<Variable(const Variable&)>& fn, const Variable& input);

}  // namespace tessera
