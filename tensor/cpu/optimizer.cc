// CPU fused optimizer updates: one parallel pass over each parameter, applying the per-element
// rules of tensor/update_rules.h (shared with the CUDA kernels). f16/bf16 parameters compute in
// f32 per element.

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"
#include "tensor/update_rules.h"

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
  const SgdRule<C> rule(u);
  parallel_for(param.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      C buf = b != nullptr ? C(b[i]) : C(0);
      p[i] = T(rule.step(C(p[i]), C(g[i]), &buf));
      if (b != nullptr) b[i] = T(buf);
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
  const AdamRule<C> rule(u);
  parallel_for(param.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      C pi = C(p[i]), mi = C(m[i]), vi = C(v[i]), vmaxi = vmax != nullptr ? C(vmax[i]) : C(0);
      rule.step(pi, C(g[i]), mi, vi, vmaxi);
      p[i] = T(pi);
      m[i] = T(mi);
      v[i] = T(vi);
      if (vmax != nullptr) vmax[i] = T(vmaxi);
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
