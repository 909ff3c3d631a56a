// Deferred weight gradients: a backward split into B (the gradients with respect to the
// inputs, which the previous pipeline stage is waiting for) and W (the gradients with respect
// to the weights, which nobody waits for), as zero-bubble pipelines need (Qi et al. 2024;
// Megatron-LM's WeightGradStore).
//
//   WeightGradStore store;
//   {
//     DeferWeightGradients defer(store);   // B: layers that split queue their weight work
//     loss.backward();                     // input gradients flow; weights get nothing yet
//   }
//   ... send the input gradient, run other micro-batches ...
//   store.run();                           // W: weight (and bias) gradients, accumulated into
//                                          // .grad, grad-ready hooks fire, in queue order
//
// Which layers split: Linear (linear()) and Conv2d (conv2d()): their weight and bias gradients
// need only the layer's input and the output gradient, which the queued work holds (and drops
// once it has run). Every other op (BatchNorm's affine parameters among them) computes all its
// gradients in B. B then W gives the ordinary backward's gradients bit for bit: the same
// kernels on the same tensors, accumulated into each leaf in the same order (a weight used
// twice in one backward is the exception: its two gradients are added to .grad one at a time
// instead of summed first).
//
// Hooks and callbacks: a weight's grad-ready hooks fire when W delivers its gradient. Post-
// backward callbacks queued during B (DDP's "wait for the buckets") are held by the store and
// run at the end of run(), after every W, so DDP reduces the finished gradients. Activation
// checkpointing composes: the segment's recomputed backward runs inside B and queues its
// weight work into the same store.
//
// A weight reached through another node (a cast under autocast) gets its gradient through a
// small backward from that node when W runs; such a node must not also receive gradients in B
// from another use (tied weights through a shared cast): not supported.
//
// Every parameter's gradient in W (defer_leaves(parameters)): the gradients B computes for those
// leaves too (LayerNorm's, an embedding's, BatchNorm's affine parameters, a bias added outside a
// split layer) are held by the store, each as it reached the leaf's accumulator, and accumulated
// when W runs (after the split layers' work, in B's order). Other leaves (a pipeline stage's
// input, whose gradient B is for) get theirs in B as usual. A micro-batch's
// parameter gradients then all arrive in its W, as one backward: what a consumer that reduces
// every backward's gradients once each needs (ZeRO-2's buckets), when the B of the next
// micro-batch runs before this one's W. The store holds those gradients until then
// (held_bytes() counts them).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autograd/custom_op.h"
#include "autograd/variable.h"

namespace tessera {

class WeightGradStore {
 public:
  WeightGradStore() = default;
  WeightGradStore(const WeightGradStore&) = delete;
  WeightGradStore& operator=(const WeightGradStore&) = delete;

  // The W work queued so far (one entry per layer that split), and the bytes it holds (layer
  // inputs and output gradients).
  size_t size() const { return work_.size(); }
  bool empty() const { return work_.empty() && callbacks_.empty(); }
  int64_t held_bytes() const { return held_bytes_; }
  // B's gradients of `leaves` are held for W too (see above); whether `leaf` is one of them.
  void defer_leaves(const std::vector<Variable>& leaves);
  bool defers(const Variable& leaf) const { return deferred_leaves_.count(leaf.impl()) > 0; }
  // Runs every queued W, oldest first, as one backward (hooks fire, callbacks queued by them
  // and those held from B run at its end). The store is empty afterwards.
  void run();

  // For the engine and the splitting nodes.
  void add(std::function<void()> work, int64_t bytes);
  void hold_callbacks(std::vector<std::function<void()>> callbacks);

 private:
  std::deque<std::pair<std::function<void()>, int64_t>> work_;
  std::vector<std::function<void()>> callbacks_;
  int64_t held_bytes_ = 0;
  std::set<const VariableImpl*> deferred_leaves_;
};

// While one lives, backward() on this thread queues the weight work of splitting layers into
// `store` instead of computing it. Guards nest (the innermost store wins).
class DeferWeightGradients {
 public:
  explicit DeferWeightGradients(WeightGradStore& store);
  ~DeferWeightGradients();
  DeferWeightGradients(const DeferWeightGradients&) = delete;
  DeferWeightGradients& operator=(const DeferWeightGradients&) = delete;

 private:
  WeightGradStore* previous_;
};

// The store backward() defers into on this thread, or null.
WeightGradStore* current_weight_grad_store();

// record() for ops whose backward splits: `input_backward` returns the gradients B computes
// (undefined for the weight inputs), `weight_backward` those W computes (undefined for the
// others); both get the output gradient. Without a store both run at once, summed per input:
// through `joint_backward` when one is given, which returns every gradient from one call (a
// convolution's kernels then prepare the output gradient once for both passes; it must give
// what B then W give). `weight_bytes`: what weight_backward's captures hold, for held_bytes().
Variable record_split(const char* name, Tensor result, const std::vector<Variable>& inputs,
                      BackwardFn input_backward, BackwardFn weight_backward, int64_t weight_bytes,
                      BackwardFn joint_backward = nullptr);

}  // namespace tessera
