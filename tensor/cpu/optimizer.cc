// CPU fused optimizer updates: one parallel pass over each parameter (see fused_updates.h for
// the formulas). f16/bf16 parameters compute in f32 per element.
#include <cmath>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {
constexpr int64_t kGrain = 16384;

template <typename T>
void sgd_kernel(const Tensor& param, const Tensor& grad, const Tensor& buffer, const SgdUpdate& u) {
  using C = compute_t<T>;
  T* p = static_cast<T*>(param.raw_data());
  const T* g = static_cast<const T*>(grad.raw_data());
  T* b = u.momentum != 0 ? static_cast<T*>(buffer.raw_data()) : nullptr;
  const C lr = C(u.lr), wd = C(u.weight_decay), mom = C(u.momentum), damp = C(1 - u.dampening);
  parallel_for(param.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      C d = C(g[i]);
      if (wd != C(0)) d += wd * C(p[i]);
      if (b != nullptr) {
        const C buf = u.first_step ? d : mom * C(b[i]) + damp * d;
        b[i] = T(buf);
        d = u.nesterov ? d + mom * buf : buf;
      }
      p[i] = T(C(p[i]) - lr * d);
    }
  });
}

template <typename T>
void adam_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamUpdate& u) {
  using C = compute_t<T>;
  T* p = static_cast<T*>(param.raw_data());
  const T* g = static_cast<const T*>(grad.raw_data());
  T* m = static_cast<T*>(exp_avg.raw_data());
  T* v = static_cast<T*>(exp_avg_sq.raw_data());
  T* vmax = u.amsgrad ? static_cast<T*>(max_exp_avg_sq.raw_data()) : nullptr;
  const double t = static_cast<double>(u.step);
  const C bias_correction2_sqrt = C(std::sqrt(1 - std::pow(u.beta2, t)));
  const C step_size = C(u.lr / (1 - std::pow(u.beta1, t)));
  const C b1w = C(1 - u.beta1), b2 = C(u.beta2), b2w = C(1 - u.beta2), eps = C(u.eps);
  const C wd = C(u.weight_decay), decay = C(1 - u.lr * u.weight_decay);
  parallel_for(param.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      C pi = C(p[i]), gi = C(g[i]);
      if (wd != C(0)) {
        if (u.decoupled_weight_decay) {
          pi *= decay;
        } else {
          gi += wd * pi;
        }
      }
      const C mi = C(m[i]) + b1w * (gi - C(m[i]));  // lerp(m, g, 1 - beta1)
      C vi = b2 * C(v[i]) + b2w * gi * gi;
      m[i] = T(mi);
      v[i] = T(vi);
      if (vmax != nullptr) {
        vi = std::max(C(vmax[i]), vi);
        vmax[i] = T(vi);
      }
      const C denom = std::sqrt(vi) / bias_correction2_sqrt + eps;
      p[i] = T(pi - step_size * (mi / denom));  // addcdiv's order
    }
  });
}
}  // namespace

void CpuBackend::sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                            const SgdUpdate& u) {
  TS_DISPATCH_FLOATING(param.dtype(), "sgd_update",
                       [&] { sgd_kernel<scalar_t>(param, grad, momentum_buffer, u); });
}

void CpuBackend::adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                             const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                             const AdamUpdate& u) {
  TS_DISPATCH_FLOATING(param.dtype(), "adam_update", [&] {
    adam_kernel<scalar_t>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, u);
  });
}

}  // namespace cpu
}  // namespace tessera
