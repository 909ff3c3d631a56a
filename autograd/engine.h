// The backward engine.
//
// backward(roots, grads) finds every node reachable from the roots, counts for each how many
// gradients it will receive, and then runs nodes once all their gradients have arrived,
// summing gradients that arrive for the same output. Among nodes that are ready it runs the
// most recently created first, so leaves' grads become ready roughly in reverse order of use
// (the order DDP's reverse-registration buckets expect). Each node's saved state is freed right
// after it runs unless retain_graph is set. Exceptions from nodes or hooks propagate to the
// caller.
//
// Post-backward callbacks are the third hook the parallel layers are built on. A hook running
// inside a backward (a grad-ready hook, say) calls queue_callback(f); once the whole graph has
// been walked, the engine runs the queued callbacks in the order they were queued (a callback may
// queue another, which runs after it), then backward() returns:
//
//   backward(loss)
//     walk the graph ── grad-ready(p5) ── grad-ready(p4): DDP queues "wait for buckets" ── ...
//     run callbacks ─── wait for buckets, average, write grads      (once, after the last node)
//   return
//
// So DDP and ZeRO finish their reductions after the last gradient without guessing which hook
// is the last one. A backward run from inside another (activation checkpointing re-running a
// segment during the outer backward) is part of the outer one: callbacks queued in it run when
// the outermost backward ends. If a node or hook throws, the queued callbacks are dropped and
// the exception propagates. While a DeferWeightGradients guard is active (weight_grad.h), the
// outermost backward hands its callbacks to the guard's store instead, which runs them after
// the deferred weight gradients.
#pragma once

#include <functional>
#include <vector>

#include "autograd/variable.h"

namespace tessera {

void backward(const std::vector<Variable>& roots, const std::vector<Tensor>& grads = {},
              bool retain_graph = false);

// Runs `body` as one backward on this thread: backward() calls inside it are nested in it, and
// callbacks queued inside run when it ends (WeightGradStore::run delivers W's gradients so).
void run_as_backward(const std::function<void()>& body);

// Queues `callback` to run once the (outermost) backward running on this thread has walked its
// whole graph. Only valid during a backward (from a hook or a node); an error otherwise.
void queue_callback(std::function<void()> callback);
// True while this thread is inside backward().
bool in_backward();

}  // namespace tessera
