// CPU pooling over NCHW planes; each (n, c) plane is independent, so planes run in parallel.
#include <algorithm>
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
    // Each window is scanned in row-major order and keeps its first maximum (or its first NaN),
    // as PyTorch does; the comparison is written so that it compiles to selects, not branches
    // (which mispredicted on every other element of random or post-ReLU data: the stem's pool
    // took 40 ns per output).
    const int64_t sy = p.stride[0], sx = p.stride[1], ky = p.kernel[0], kx = p.kernel[1];
    const int64_t pad_y = p.padding[0], pad_x = p.padding[1], h = g.h, w = g.w;
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        const scalar_t* xp = x + pl * h * w;
        scalar_t* yp = y + pl * g.oh * g.ow;
        int64_t* ip = idx + pl * g.oh * g.ow;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t y0 = oy * sy - pad_y;
          const int64_t iy0 = std::max<int64_t>(y0, 0), iy1 = std::min(y0 + ky, h);
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const int64_t x0 = ox * sx - pad_x;
            const int64_t ix0 = std::max<int64_t>(x0, 0), ix1 = std::min(x0 + kx, w);
            C best = -std::numeric_limits<C>::infinity();
            int64_t best_at = -1;
            for (int64_t iy = iy0; iy < iy1; ++iy) {
              for (int64_t ix = ix0; ix < ix1; ++ix) {
                const C v = C(xp[iy * w + ix]);
                const bool take = best_at < 0 || v > best || (v != v && best == best);
                best = take ? v : best;
                best_at = take ? iy * w + ix : best_at;
              }
            }
            yp[oy * g.ow + ox] = scalar_t(best);
            ip[oy * g.ow + ox] = best_at;
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
