// The per-element arithmetic of the fused SGD and Adam/AdamW updates (PyTorch's rules, in its
// order of operations), written once for the CPU kernels (tensor/cpu/optimizer.cc) and the
// CUDA kernels (tensor/cuda/optim.cu). C is the compute type: f32 (also for f16/bf16
// parameters) or f64. The constants are derived on the host; step() runs anywhere.
#pragma once

#include <cmath>

#include "tensor/philox.h"  // TS_HOST_DEVICE
#include "tensor/update_params.h"

namespace tessera {

template <typename C>
struct SgdRule {
  C lr, wd, mom, damp;
  bool nesterov, first_step, has_momentum;

  explicit SgdRule(const SgdUpdate& u)
      : lr(C(u.lr)), wd(C(u.weight_decay)), mom(C(u.momentum)), damp(C(1 - u.dampening)),
        nesterov(u.nesterov), first_step(u.first_step), has_momentum(u.momentum != 0) {}

  // The new parameter value; *buf (the momentum buffer, when has_momentum) is updated in place.
  TS_HOST_DEVICE C step(C p, C g, C* buf) const {
    C d = g;
    if (wd != C(0)) d += wd * p;
    if (has_momentum) {
      const C b = first_step ? d : mom * *buf + damp * d;
      *buf = b;
      d = nesterov ? d + mom * b : b;
    }
    return p - lr * d;
  }
};

template <typename C>
struct AdamRule {
  C b1w, b2, b2w, eps, wd, decay, bias_correction2_sqrt, step_size;
  bool decoupled, amsgrad;

  explicit AdamRule(const AdamUpdate& u) {
    const double t = static_cast<double>(u.step);
    b1w = C(1 - u.beta1);
    b2 = C(u.beta2);
    b2w = C(1 - u.beta2);
    eps = C(u.eps);
    wd = C(u.weight_decay);
    decay = C(1 - u.lr * u.weight_decay);
    bias_correction2_sqrt = C(std::sqrt(1 - std::pow(u.beta2, t)));
    step_size = C(u.lr / (1 - std::pow(u.beta1, t)));
    decoupled = u.decoupled_weight_decay;
    amsgrad = u.amsgrad;
  }

  // Updates p, m, v and (amsgrad) vmax in place.
  TS_HOST_DEVICE void step(C& p, C g, C& m, C& v, C& vmax) const {
    if (wd != C(0)) {
      if (decoupled) {
        p *= decay;
      } else {
        g += wd * p;
      }
    }
    m = m + b1w * (g - m);  // lerp(m, g, 1 - beta1)
    v = b2 * v + b2w * g * g;
    C denom_v = v;
    if (amsgrad) {
      vmax = vmax < v ? v : vmax;  // std::max's choice
      denom_v = vmax;
    }
    const C denom = std::sqrt(denom_v) / bias_correction2_sqrt + eps;
    p = p - step_size * (m / denom);  // addcdiv's order
  }
};

}  // namespace tessera
