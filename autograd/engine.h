// The backward engine.
//
// backward(roots, grads) finds every node reachable from the roots, counts for each how many
// gradients it will receive, and then runs nodes once all their gradients have arrived,
// summing gradients that arrive for the same output. Among nodes that are ready it runs the
// most recently created first, so leaves' grads become ready roughly in reverse order of use
// (the order DDP's reverse-registration buckets expect). Each node's saved state is freed right
// after it runs unless retain_graph is set. Exceptions from nodes or hooks propagate to the
// caller.
#pragma once

#include <vector>

#include "autograd/variable.h"

namespace tessera {

void backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads = {},
              bool retain_graph = false);

}  // namespace tessera
