// The hyper-parameters of one fused optimizer update (tensor/fused_updates.h applies them).
// No dependencies, so the CUDA update kernels (tensor/cuda/optim.cu) can include it.
#pragma once

#include <cstdint>

namespace tessera {

// d = g + wd p;  if momentum: b = first ? d : momentum b + (1 - dampening) d,
//                             d = nesterov ? d + momentum b : b;
// p -= lr d.   momentum_buffer may be undefined when momentum == 0.
struct SgdUpdate {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  // The first step with momentum sets the buffer to the gradient (no dampening).
  bool first_step = false;
};

// Adam: g += wd p (AdamW instead: p *= 1 - lr wd); m = lerp(m, g, 1 - b1);
// v = b2 v + (1 - b2) g^2; [amsgrad: vmax = max(vmax, v), used for v];
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// max_exp_avg_sq may be undefined unless amsgrad.
struct AdamUpdate {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false;
  int64_t step = 1;  // after incrementing: 1 on the first update
};

}  // namespace tessera
