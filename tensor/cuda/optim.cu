// Fused optimizer updates on CUDA: one thread per element reads the parameter, its gradient and
// its state once and writes them back, with PyTorch's arithmetic (tensor/update_params.h;
// the same order of operations as tensor/cpu/optimizer.cc).
#include <cmath>

#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"

namespace tessera {
namespace cuda {

namespace {

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* b, SgdUpdate u, int64_t n) {
  using C = acc_t<T>;
  const C lr = C(u.lr), wd = C(u.weight_decay), mom = C(u.momentum), damp = C(1 - u.dampening);
  TS_GRID_STRIDE(i, n) {
    C d = load(g[i]);
    if (wd != C(0)) d += wd * load(p[i]);
    if (b != nullptr) {
      const C buf = u.first_step ? d : mom * load(b[i]) + damp * d;
      b[i] = store<T>(buf);
      d = u.nesterov ? d + mom * buf : buf;
    }
    p[i] = store<T>(load(p[i]) - lr * d);
  }
}

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, AdamUpdate u,
                            acc_t<T> bias_correction2_sqrt, acc_t<T> step_size, int64_t n) {
  using C = acc_t<T>;
  const C b1w = C(1 - u.beta1), b2 = C(u.beta2), b2w = C(1 - u.beta2), eps = C(u.eps);
  const C wd = C(u.weight_decay), decay = C(1 - u.lr * u.weight_decay);
  TS_GRID_STRIDE(i, n) {
    C pi = load(p[i]), gi = load(g[i]);
    if (wd != C(0)) {
      if (u.decoupled_weight_decay) {
        pi *= decay;
      } else {
        gi += wd * pi;
      }
    }
    const C mi = load(m[i]) + b1w * (gi - load(m[i]));
    C vi = b2 * load(v[i]) + b2w * gi * gi;
    m[i] = store<T>(mi);
    v[i] = store<T>(vi);
    if (vmax != nullptr) {
      const C previous = load(vmax[i]);
      vi = previous > vi ? previous : vi;
      vmax[i] = store<T>(vi);
    }
    const C denom = sqrt(vi) / bias_correction2_sqrt + eps;
    p[i] = store<T>(pi - step_size * (mi / denom));
  }
}

}  // namespace

void launch_sgd_update(void* param, const void* grad, void* momentum_buffer, DType dtype,
                       int64_t numel, const SgdUpdate& u, cudaStream_t s) {
  if (numel == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "sgd_update", [&] {
    sgd_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(
        static_cast<scalar_t*>(param), static_cast<const scalar_t*>(grad),
        u.momentum != 0 ? static_cast<scalar_t*>(momentum_buffer) : nullptr, u, numel);
  });
  check_launch("sgd_update");
}

void launch_adam_update(void* param, const void* grad, void* exp_avg, void* exp_avg_sq,
                        void* max_exp_avg_sq, DType dtype, int64_t numel, const AdamUpdate& u,
                        cudaStream_t s) {
  if (numel == 0) return;
  const double t = static_cast<double>(u.step);
  TS_CUDA_DISPATCH_FLOATING(dtype, "adam_update", [&] {
    using C = acc_t<scalar_t>;
    const C bc2 = C(std::sqrt(1 - std::pow(u.beta2, t)));
    const C step_size = C(u.lr / (1 - std::pow(u.beta1, t)));
    adam_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, s>>>(
        static_cast<scalar_t*>(param), static_cast<const scalar_t*>(grad),
        static_cast<scalar_t*>(exp_avg), static_cast<scalar_t*>(exp_avg_sq),
        u.amsgrad ? static_cast<scalar_t*>(max_exp_avg_sq) : nullptr, u, bc2, step_size, numel);
  });
  check_launch("adam_update");
}

}  // namespace cuda
}  // namespace tessera
