// Pooling on CUDA over NCHW planes: one thread per output element forward. Max-pool backward
// scatters through the saved indices; the average-pool backward passes run one thread per
// *input* element and gather from the windows that cover it (no atomics, deterministic).
#include <cmath>

#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"
#include "tensor/pool_windows.h"

namespace tessera {
namespace cuda {

namespace {

__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

template <typename T>
__global__ void max_pool_kernel(const T* x, T* y, int64_t* indices, PoolArgs p, int64_t n) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(o, n) {
    const int64_t ox = o % p.ow, oy = (o / p.ow) % p.oh, plane = o / (p.ow * p.oh);
    const T* xp = x + plane * p.h * p.w;
    const int64_t y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
    C best = C(0);
    int64_t best_at = -1;
    bool stop = false;
    for (int64_t iy = imax(y0, 0); iy < imin(y0 + p.kh, p.h) && !stop; ++iy) {
      for (int64_t ix = imax(x0, 0); ix < imin(x0 + p.kw, p.w); ++ix) {
        const C v = load(xp[iy * p.w + ix]);
        if (best_at < 0 || v > best || v != v) {
          best = v;
          best_at = iy * p.w + ix;
          if (v != v) {
            stop = true;  // NaN wins, as on the CPU
            break;
          }
        }
      }
    }
    y[o] = store<T>(best);
    indices[o] = best_at;
  }
}

// The output windows covering input row/column i: [first, last] (may be empty).
__device__ __forceinline__ void covering(int64_t i, int64_t pad, int64_t kernel, int64_t stride,
                                         int64_t out, int64_t* first, int64_t* last) {
  const int64_t shifted = i + pad;
  *first = shifted < kernel ? 0 : (shifted - kernel) / stride + 1;
  *last = imin(shifted / stride, out - 1);
}

// Each output adds its gradient at the input position its index names; overlapping windows
// may name one position twice, hence the atomic add.
template <typename T>
__global__ void max_pool_backward_kernel(const T* dy, const int64_t* indices, T* dx, PoolArgs p,
                                         int64_t n) {
  TS_GRID_STRIDE(o, n) {
    const int64_t plane = o / (p.ow * p.oh);
    if (indices[o] >= 0) atomicAdd(dx + plane * p.h * p.w + indices[o], dy[o]);
  }
}

// PyTorch's avg_pool2d window and divisor (tensor/pool_windows.h, as on the CPU).
__device__ __forceinline__ AvgWindow avg_window(int64_t oy, int64_t ox, const PoolArgs& p) {
  return tessera::avg_window(oy, ox, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.h, p.w,
                             p.count_include_pad);
}

template <typename T>
__global__ void avg_pool_kernel(const T* x, T* y, PoolArgs p, int64_t n) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(o, n) {
    const int64_t ox = o % p.ow, oy = (o / p.ow) % p.oh, plane = o / (p.ow * p.oh);
    const T* xp = x + plane * p.h * p.w;
    const AvgWindow win = avg_window(oy, ox, p);
    C s = C(0);
    for (int64_t iy = win.y0; iy < win.y1; ++iy) {
      for (int64_t ix = win.x0; ix < win.x1; ++ix) s += load(xp[iy * p.w + ix]);
    }
    y[o] = store<T>(s / C(win.divisor));
  }
}

template <typename T>
__global__ void avg_pool_backward_kernel(const T* dy, T* dx, PoolArgs p, int64_t n) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(i, n) {
    const int64_t ix = i % p.w, iy = (i / p.w) % p.h, plane = i / (p.w * p.h);
    int64_t oy0, oy1, ox0, ox1;
    covering(iy, p.ph, p.kh, p.sh, p.oh, &oy0, &oy1);
    covering(ix, p.pw, p.kw, p.sw, p.ow, &ox0, &ox1);
    C sum = C(0);
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const AvgWindow win = avg_window(oy, ox, p);
        if (iy >= win.y0 && iy < win.y1 && ix >= win.x0 && ix < win.x1) {
          sum += load(dy[(plane * p.oh + oy) * p.ow + ox]) / C(win.divisor);
        }
      }
    }
    dx[i] = store<T>(sum);
  }
}


template <typename T>
__global__ void adaptive_avg_kernel(const T* x, T* y, PoolArgs p, int64_t n) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(o, n) {
    const int64_t ox = o % p.ow, oy = (o / p.ow) % p.oh, plane = o / (p.ow * p.oh);
    const T* xp = x + plane * p.h * p.w;
    const int64_t y0 = adaptive_start(oy, p.oh, p.h), y1 = adaptive_end(oy, p.oh, p.h);
    const int64_t x0 = adaptive_start(ox, p.ow, p.w), x1 = adaptive_end(ox, p.ow, p.w);
    C s = C(0);
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = x0; ix < x1; ++ix) s += load(xp[iy * p.w + ix]);
    }
    y[o] = store<T>(s / C((y1 - y0) * (x1 - x0)));
  }
}

template <typename T>
__global__ void adaptive_avg_backward_kernel(const T* dy, T* dx, PoolArgs p, int64_t n) {
  using C = acc_t<T>;
  TS_GRID_STRIDE(i, n) {
    const int64_t ix = i % p.w, iy = (i / p.w) % p.h, plane = i / (p.w * p.h);
    C sum = C(0);
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int64_t y0 = adaptive_start(oy, p.oh, p.h), y1 = adaptive_end(oy, p.oh, p.h);
      if (iy < y0 || iy >= y1) continue;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        const int64_t x0 = adaptive_start(ox, p.ow, p.w), x1 = adaptive_end(ox, p.ow, p.w);
        if (ix < x0 || ix >= x1) continue;
        sum += load(dy[(plane * p.oh + oy) * p.ow + ox]) / C((y1 - y0) * (x1 - x0));
      }
    }
    dx[i] = store<T>(sum);
  }
}

}  // namespace

#define TS_POOL_LAUNCH(NAME, KERNEL, COUNT, ...)                                       \
  do {                                                                                 \
    const int64_t count = (COUNT);                                                     \
    if (count == 0) return;                                                            \
    TS_CUDA_DISPATCH_FLOATING(dtype, NAME, [&] {                                       \
      KERNEL<scalar_t><<<blocks_for(count), kThreads, 0, s>>>(__VA_ARGS__, p, count); \
    });                                                                                \
    check_launch(NAME);                                                                \
  } while (0)

void launch_max_pool2d(const void* in, void* out, int64_t* indices, const PoolArgs& p,
                       DType dtype, cudaStream_t s) {
  TS_POOL_LAUNCH("max_pool2d", max_pool_kernel, p.planes * p.oh * p.ow,
                 static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out), indices);
}

void launch_max_pool2d_backward(const void* grad_out, const int64_t* indices, void* grad_in,
                                const PoolArgs& p, DType dtype, cudaStream_t s) {
  TS_POOL_LAUNCH("max_pool2d_backward", max_pool_backward_kernel, p.planes * p.oh * p.ow,
                 static_cast<const scalar_t*>(grad_out), indices,
                 static_cast<scalar_t*>(grad_in));
}

void launch_avg_pool2d(const void* in, void* out, const PoolArgs& p, DType dtype,
                       cudaStream_t s) {
  TS_POOL_LAUNCH("avg_pool2d", avg_pool_kernel, p.planes * p.oh * p.ow,
                 static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out));
}

void launch_avg_pool2d_backward(const void* grad_out, void* grad_in, const PoolArgs& p,
                                DType dtype, cudaStream_t s) {
  TS_POOL_LAUNCH("avg_pool2d_backward", avg_pool_backward_kernel, p.planes * p.h * p.w,
                 static_cast<const scalar_t*>(grad_out), static_cast<scalar_t*>(grad_in));
}

void launch_adaptive_avg_pool2d(const void* in, void* out, const PoolArgs& p, DType dtype,
                                cudaStream_t s) {
  TS_POOL_LAUNCH("adaptive_avg_pool2d", adaptive_avg_kernel, p.planes * p.oh * p.ow,
                 static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out));
}

void launch_adaptive_avg_pool2d_backward(const void* grad_out, void* grad_in, const PoolArgs& p,
                                         DType dtype, cudaStream_t s) {
  TS_POOL_LAUNCH("adaptive_avg_pool2d_backward", adaptive_avg_backward_kernel,
                 p.planes * p.h * p.w, static_cast<const scalar_t*>(grad_out),
                 static_cast<scalar_t*>(grad_in));
}

}  // namespace cuda
}  // namespace tessera
