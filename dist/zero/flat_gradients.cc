#include "dist/zero/flat_gradients.h"

#include "autograd/engine.h"

namespace tessera {
namespace dist {
namespace zero {

void move_grad_into(const Variable& param, Tensor slot) {
  const Tensor& grad = param.grad();
  if (grad.defined()) slot.copy_(grad.reshape({-1}));
  param.zero_grad(/*set_to_none=*/true);
}

void EndOfBackward::start() {
  if (in_backward_) return;
  in_backward_ = true;
  queue_callback([this] {
    finish_();
    in_backward_ = false;
  });
}

}  // namespace zero
}  // namespace dist
}  // namespace tessera
