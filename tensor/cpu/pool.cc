// CPU pooling over NCHW planes; each (n, c) plane is independent, so planes run in parallel.
#include <cmath>
#include <limits>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"
#include "tensor/pool_windows.h"

namespace tessera {
namespace cpu {

namespace {

struct Planes {
  int64_t count, h, w, oh, ow;
};

Planes planes(const Tensor& in, const Tensor& out) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), out.size(2), out.size(3)};
}


}  // namespace

void CpuBackend::max_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out,
                            const Tensor& indices) {
  const Planes g = planes(input, out);
  int64_t* idx = indices.data<int64_t>();
  TS_DISPATCH_FLOATING(input.dtype(), "max_pool2d", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* x = input.data<scalar_t>();
    scalar_t* y = out.data<scalar_t>();
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        const scalar_t* xp = x + pl * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t y0 = oy * p.stride[0] - p.padding[0];
            const int64_t x0 = ox * p.stride[1] - p.padding[1];
            C best = -std::numeric_limits<C>::infinity();
            int64_t best_at = -1;
            for (int64_t iy = std::max<int64_t>(y0, 0); iy < std::min(y0 + p.kernel[0], g.h); ++iy) {
              for (int64_t ix = std::max<int64_t>(x0, 0); ix < std::min(x0 + p.kernel[1], g.w);
                   ++ix) {
                const C v = C(xp[iy * g.w + ix]);
                if (best_at < 0 || v > best || v != v) {
                  best = v;
                  best_at = iy * g.w + ix;
                  if (v != v) break;
                }
              }
            }
            const int64_t o = pl * g.oh * g.ow + oy * g.ow + ox;
            y[o] = scalar_t(best);
            idx[o] = best_at;
          }
        }
      }
    });
  });
}

void CpuBackend::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                                     const Tensor& grad_in) {
  const Planes g = planes(grad_in, grad_out);
  const int64_t* idx = indices.data<int64_t>();
  TS_DISPATCH_FLOATING(grad_out.dtype(), "max_pool2d_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* dy = grad_out.data<scalar_t>();
    scalar_t* dx = grad_in.data<scalar_t>();
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        scalar_t* dxp = dx + pl * g.h * g.w;
        for (int64_t o = pl * g.oh * g.ow; o < (pl + 1) * g.oh * g.ow; ++o) {
          if (idx[o] >= 0) dxp[idx[o]] = scalar_t(C(dxp[idx[o]]) + C(dy[o]));
        }
      }
    });
  });
}

namespace {
// PyTorch's avg_pool2d window (tensor/pool_windows.h).
inline AvgWindow avg_window(int64_t oy, int64_t ox, const Pool2dParams& p, int64_t h, int64_t w) {
  return tessera::avg_window(oy, ox, p.kernel[0], p.kernel[1], p.stride[0], p.stride[1],
                             p.padding[0], p.padding[1], h, w, p.count_include_pad);
}
}  // namespace

void CpuBackend::avg_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out) {
  const Planes g = planes(input, out);
  TS_DISPATCH_FLOATING(input.dtype(), "avg_pool2d", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* x = input.data<scalar_t>();
    scalar_t* y = out.data<scalar_t>();
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        const scalar_t* xp = x + pl * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const AvgWindow win = avg_window(oy, ox, p, g.h, g.w);
            C s = 0;
            for (int64_t iy = win.y0; iy < win.y1; ++iy) {
              for (int64_t ix = win.x0; ix < win.x1; ++ix) s += C(xp[iy * g.w + ix]);
            }
            y[pl * g.oh * g.ow + oy * g.ow + ox] = scalar_t(s / C(win.divisor));
          }
        }
      }
    });
  });
}

void CpuBackend::avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p,
                                     const Tensor& grad_in) {
  const Planes g = planes(grad_in, grad_out);
  TS_DISPATCH_FLOATING(grad_out.dtype(), "avg_pool2d_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* dy = grad_out.data<scalar_t>();
    scalar_t* dx = grad_in.data<scalar_t>();
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        scalar_t* dxp = dx + pl * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const AvgWindow win = avg_window(oy, ox, p, g.h, g.w);
            const C share = C(dy[pl * g.oh * g.ow + oy * g.ow + ox]) / C(win.divisor);
            for (int64_t iy = win.y0; iy < win.y1; ++iy) {
              for (int64_t ix = win.x0; ix < win.x1; ++ix) {
                dxp[iy * g.w + ix] = scalar_t(C(dxp[iy * g.w + ix]) + share);
              }
            }
          }
        }
      }
    });
  });
}

void CpuBackend::adaptive_avg_pool2d(const Tensor& input, const Tensor& out) {
  const Planes g = planes(input, out);
  TS_DISPATCH_FLOATING(input.dtype(), "adaptive_avg_pool2d", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* x = input.data<scalar_t>();
    scalar_t* y = out.data<scalar_t>();
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        const scalar_t* xp = x + pl * g.h * g.w;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t y0 = adaptive_start(oy, g.oh, g.h), y1 = adaptive_end(oy, g.oh, g.h);
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t x0 = adaptive_start(ox, g.ow, g.w), x1 = adaptive_end(ox, g.ow, g.w);
            double s = 0;
            for (int64_t iy = y0; iy < y1; ++iy) {
              for (int64_t ix = x0; ix < x1; ++ix) s += C(xp[iy * g.w + ix]);
            }
            y[pl * g.oh * g.ow + oy * g.ow + ox] = scalar_t(C(s / ((y1 - y0) * (x1 - x0))));
          }
        }
      }
    });
  });
}

void CpuBackend::adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) {
  const Planes g = planes(grad_in, grad_out);
  TS_DISPATCH_FLOATING(grad_out.dtype(), "adaptive_avg_pool2d_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* dy = grad_out.data<scalar_t>();
    scalar_t* dx = grad_in.data<scalar_t>();
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        scalar_t* dxp = dx + pl * g.h * g.w;
        std::fill(dxp, dxp + g.h * g.w, scalar_t(0));
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t y0 = adaptive_start(oy, g.oh, g.h), y1 = adaptive_end(oy, g.oh, g.h);
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t x0 = adaptive_start(ox, g.ow, g.w), x1 = adaptive_end(ox, g.ow, g.w);
            const C share = C(dy[pl * g.oh * g.ow + oy * g.ow + ox]) / C((y1 - y0) * (x1 - x0));
            for (int64_t iy = y0; iy < y1; ++iy) {
              for (int64_t ix = x0; ix < x1; ++ix) {
                dxp[iy * g.w + ix] = scalar_t(C(dxp[iy * g.w + ix]) + share);
              }
            }
          }
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace tessera
