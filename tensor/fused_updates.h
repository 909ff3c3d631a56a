// Fused optimizer updates: one pass over a parameter, its gradient and its state, in place.
// The arithmetic is PyTorch's (torch.optim.SGD / Adam / AdamW, single-tensor path), so a step
// here and a step there agree to rounding. All tensors are contiguous, of one floating dtype,
// on one device.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tessera {

struct SgdUpdate {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  // The first step with momentum sets the buffer to the gradient (no dampening).
  bool first_step = false;
};

// d = g + wd p;  if momentum: b = first ? d : momentum b + (1 - dampening) d,
//                             d = nesterov ? d + momentum b : b;
// p -= lr d.   momentum_buffer may be undefined when momentum == 0.
void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const SgdUpdate& u);

struct AdamUpdate {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  int64_t step = 1;  // after incrementing: 1 on the first update
};

// Adam: g += wd p (AdamW instead: p *= 1 - lr wd); m = lerp(m, g, 1 - b1);
// v = b2 v + (1 - b2) g^2; [amsgrad: vmax = max(vmax, v), used for v];
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// max_exp_avg_sq may be undefined unless amsgrad.
void adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u);

}  // namespace tessera
