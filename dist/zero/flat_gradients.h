// What ZeRO-2's gradient buckets (zero_stage2_buckets.cc) and ZeRO-3's units (flat_parameter.cc,
// fully_sharded.cc) share during a backward: each parameter's gradient moves into a flat buffer
// the moment its grad-ready hook fires, and the reduce-scatters still in flight are finished
// once, after the whole backward:
//
//   grad-ready(p)   first of this backward? queue the end-of-backward callback
//                   copy p.grad into its slot of the flat buffer, release p.grad
//   ...             (a full bucket / unit is reduce-scattered, overlapping the rest)
//   end of backward the callback: reduce what is left, wait, accumulate into the shard's grad
//
// Releasing p.grad at once is what makes gradient memory ~1/N: only flat buffers in flight and
// the shard's gradient stay alive.
#pragma once

#include <functional>

#include "autograd/variable.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace zero {

// Copies `param`'s gradient into `slot` (a view of a flat gradient buffer with param's number of
// elements) and releases the parameter's own copy: from here the flat buffer holds it. A
// parameter without a gradient leaves the slot as it was (zeros).
void move_grad_into(const Variable& param, Tensor slot);

// The end-of-backward callback of a component fed by grad-ready (or pre-backward) hooks.
class EndOfBackward {
 public:
  explicit EndOfBackward(std::function<void()> finish) : finish_(std::move(finish)) {}
  // From a hook inside a backward: the first call of each backward queues `finish`
  // (autograd/engine.h), which the engine runs once the whole backward is done.
  void start();
  // True from start() until `finish` has returned: a backward is delivering gradients.
  bool in_backward() const { return in_backward_; }

 private:
  std::function<void()> finish_;
  bool in_backward_ = false;
};

}  // namespace zero
}  // namespace dist
}  // namespace tessera
