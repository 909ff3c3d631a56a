// CPU fused optimizer updates: one parallel pass over each parameter, applying the per-element
// rules of tensor/update_rules.h (shared with the CUDA kernels). f16/bf16 parameters compute in
// f32 per element. Also the loss scaler's unscale-and-check pass over the gradients.

#include <atomic>
#include <cmath>

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
    // Local copies: the rule's floats and the arrays can then not alias, so the rule's branches
    // leave the loop and the loop vectorizes (through the captured references, every store to
    // p or b could have changed the learning rate: one element at a time, 2x slower).
    const SgdRule<C> r = rule;
    T* __restrict pr = p;
    const T* __restrict gr = g;
    T* __restrict br = b;
    if (br == nullptr) {
      for (int64_t i = i0; i < i1; ++i) pr[i] = T(r.step(C(pr[i]), C(gr[i]), nullptr));
      return;
    }
    for (int64_t i = i0; i < i1; ++i) {
      C buf = C(br[i]);
      pr[i] = T(r.step(C(pr[i]), C(gr[i]), &buf));
      br[i] = T(buf);
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
// grad *= inv_scale; true if any element was inf or NaN (each value is checked as read, before
// scaling, as PyTorch's kernel does).
template <typename T>
bool unscale_kernel(const Tensor& grad, compute_t<T> inv_scale) {
  using C = compute_t<T>;
  T* g = static_cast<T*>(grad.raw_data());
  std::atomic<bool> found{false};
  parallel_for(grad.numel(), kGrain, [&](int64_t i0, int64_t i1) {
    bool local = false;
    for (int64_t i = i0; i < i1; ++i) {
      const C v = C(g[i]);
      local |= !std::isfinite(v);
      g[i] = T(v * inv_scale);
    }
    if (local) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}
}  // namespace

void CpuBackend::non_finite_check_and_unscale(const std::vector<Tensor>& grads,
                                              const Tensor& found_inf, double inv_scale) {
  bool found = false;
  for (const Tensor& g : grads) {
    TS_DISPATCH_FLOATING(g.dtype(), "non_finite_check_and_unscale", [&] {
      found |= unscale_kernel<scalar_t>(g, static_cast<compute_t<scalar_t>>(inv_scale));
    });
  }
  if (found) *static_cast<float*>(found_inf.raw_data()) = 1.0f;
}

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
