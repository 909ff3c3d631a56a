// CPU pooling over NCHW planes; each (n, c) plane is independent, so planes run in parallel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tensor/cpu/bf16_block.h"
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

// Max pooling works on planes of its compute type C: f32 and f64 planes in place, f16 and bf16
// planes widened a plane at a time into `buf` (bf16_block.h) and, for outputs, rounded back by
// store_plane. (Converting one element at a time inside the tap loops made the stem's f16 pool
// 2.7x the f32 one.) A maximum is one of its inputs, so the rounding back is exact.
template <typename T, typename C>
const C* plane_in(const T* p, int64_t n, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return p;
  } else {
    buf.resize(n);
    widen(p, buf.data(), n);
    return buf.data();
  }
}

// keep: the plane's values are read (sums added onto them), not only written.
template <typename T, typename C>
C* plane_out(T* p, int64_t n, bool keep, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    return p;
  } else {
    buf.resize(n);
    if (keep) widen(p, buf.data(), n);
    return buf.data();
  }
}

template <typename T, typename C>
void store_plane(const C* plane, T* p, int64_t n) {
  if constexpr (!std::is_same_v<T, C>) narrow(plane, p, n);
}

}  // namespace

namespace {

// Max pooling on channels-last tensors (NHWC storage, indices too): a row of outputs at a time,
// with the input rows under its windows widened to C once; each output pixel scans its taps in
// row-major order across all channels at once, keeping the first maximum (or first NaN) as the
// NCHW kernel does, so both give the same outputs and indices.
template <typename T, typename C>
void max_pool2d_channels_last(const T* x, T* y, int64_t* idx, int64_t n, int64_t ch,
                              const Planes& g, const Pool2dParams& p) {
  const int64_t sy = p.stride[0], sx = p.stride[1], ky = p.kernel[0], kx = p.kernel[1];
  const int64_t pad_y = p.padding[0], pad_x = p.padding[1], h = g.h, w = g.w, ow = g.ow;
  TS_CHECK(h * w <= std::numeric_limits<int32_t>::max(), "max_pool2d: a channels-last plane of ",
           h, "x", w, " pixels is more than its 32-bit tap indices hold");
  parallel_for(n * g.oh, 1, [&](int64_t r0, int64_t r1) {
    std::vector<std::vector<C>> bufs(ky);
    std::vector<C> out_buf;
    std::vector<int32_t> tap_buf(ch);
    std::vector<const C*> rows(ky);  // the input rows under this output row's windows
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.oh, oy = r % g.oh;
      for (int64_t i = 0; i < ky; ++i) {
        const int64_t iy = oy * sy - pad_y + i;
        rows[i] = iy >= 0 && iy < h ? plane_in(x + (b * h + iy) * w * ch, w * ch, bufs[i])
                                    : nullptr;
      }
      C* yr = plane_out(y + r * ow * ch, ow * ch, false, out_buf);
      int64_t* ir = idx + r * ow * ch;
      for (int64_t ox = 0; ox < ow; ++ox) {
        // The first tap inside the input initializes the window; each later one replaces a
        // channel's value where it is larger (or NaN over a number), in a loop of same-width
        // compares and blends that vectorizes (the index is 32-bit until it is stored).
        C* __restrict best = yr + ox * ch;
        int32_t* __restrict at = tap_buf.data();
        bool first = true;
        for (int64_t i = 0; i < ky; ++i) {
          if (!rows[i]) continue;
          const int64_t iy = oy * sy - pad_y + i;
          for (int64_t j = 0; j < kx; ++j) {
            const int64_t ix = ox * sx - pad_x + j;
            if (ix < 0 || ix >= w) continue;
            const C* __restrict v = rows[i] + ix * ch;
            const int32_t tap = static_cast<int32_t>(iy * w + ix);
            if (first) {
              for (int64_t c = 0; c < ch; ++c) {
                best[c] = v[c];
                at[c] = tap;
              }
              first = false;
              continue;
            }
            for (int64_t c = 0; c < ch; ++c) {
              const bool take = (v[c] > best[c]) | ((v[c] != v[c]) & (best[c] == best[c]));
              best[c] = take ? v[c] : best[c];
              at[c] = take ? tap : at[c];
            }
          }
        }
        if (first) {  // no tap inside the input
          for (int64_t c = 0; c < ch; ++c) {
            best[c] = -std::numeric_limits<C>::infinity();
            at[c] = -1;
          }
        }
        for (int64_t c = 0; c < ch; ++c) ir[ox * ch + c] = at[c];
      }
      store_plane(yr, y + r * ow * ch, ow * ch);
    }
  });
}

// Its backward: each image's input gradient summed in C, outputs in row-major order (the NCHW
// kernel's order, so the sums are the same), rounded to T once.
template <typename T, typename C>
void max_pool2d_backward_channels_last(const T* dy, const int64_t* idx, T* dx, int64_t n,
                                       int64_t ch, const Planes& g) {
  const int64_t in_image = g.h * g.w * ch, out_pixels = g.oh * g.ow;
  parallel_for(n, 1, [&](int64_t b0, int64_t b1) {
    std::vector<C> dy_buf, dx_buf;
    for (int64_t b = b0; b < b1; ++b) {
      const C* dyi = plane_in(dy + b * out_pixels * ch, out_pixels * ch, dy_buf);
      const int64_t* ii = idx + b * out_pixels * ch;
      C* dxi = plane_out(dx + b * in_image, in_image, false, dx_buf);
      std::fill(dxi, dxi + in_image, C(0));
      for (int64_t o = 0; o < out_pixels; ++o) {
        for (int64_t c = 0; c < ch; ++c) {
          const int64_t at = ii[o * ch + c];
          if (at >= 0) dxi[at * ch + c] += dyi[o * ch + c];
        }
      }
      store_plane(dxi, dx + b * in_image, in_image);
    }
  });
}

}  // namespace

namespace {

// One window tap over a row of outputs [lo, hi): output ox compares in[ox * stride] (the input
// under the tap, at input index at0 + ox * stride) with its best so far. Bitwise | rather than
// ||: no branches, so the loop vectorizes. S: the stride as a constant (0: the argument's).
template <int S, typename C, typename I>
void max_tap(const C* __restrict in, C* __restrict best, I* __restrict index, I at0, I stride,
             int64_t lo, int64_t hi) {
  if constexpr (S != 0) stride = S;
  for (int64_t ox = lo; ox < hi; ++ox) {
    const C v = in[ox * stride], b = best[ox];
    const I i = index[ox];
    const bool take = (i < 0) | (v > b) | ((v != v) & (b == b));
    best[ox] = take ? v : b;
    index[ox] = take ? static_cast<I>(at0 + static_cast<I>(ox) * stride) : i;
  }
}

}  // namespace

void CpuBackend::max_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out,
                            const Tensor& indices) {
  const Planes g = planes(input, out);
  if (!input.is_contiguous()) {  // channels-last (Backend::channels_last)
    TS_DISPATCH_FLOATING(input.dtype(), "max_pool2d", [&] {
      max_pool2d_channels_last<scalar_t, compute_t<scalar_t>>(
          input.data<scalar_t>(), out.data<scalar_t>(), indices.data<int64_t>(), input.size(0),
          input.size(1), g, p);
    });
    return;
  }
  int64_t* idx = indices.data<int64_t>();
  TS_DISPATCH_FLOATING(input.dtype(), "max_pool2d", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* x = input.data<scalar_t>();
    scalar_t* y = out.data<scalar_t>();
    // A row of outputs at a time, one window tap at a time: for tap (i, j) every output of the
    // row compares the input value under that tap with its best so far, a loop over ox that
    // compiles to vector compares and blends. The taps go in row-major order, so each window
    // still keeps its first maximum (or its first NaN), as PyTorch's window scan does. (Window
    // by window, the compare was a branch that random or post-ReLU data mispredicted: the stem's
    // pool took 50-85 ms at batch 8 on one thread.)
    // The taps' indices are kept as 32-bit ints while a row is scanned (a 64-bit index blend
    // did not vectorize) and widened once per row; planes past 2^31 elements keep 64-bit
    // ones. At stride s > 1 the plane is first split into its s column phases
    // (phase r holds columns r, r + s, ...), so that every tap reads consecutive floats. (With
    // strided reads and 64-bit indices the stem's pool took 10 ms at batch 8 on one thread.)
    const int64_t sy = p.stride[0], sx = p.stride[1], ky = p.kernel[0], kx = p.kernel[1];
    const int64_t pad_y = p.padding[0], pad_x = p.padding[1], h = g.h, w = g.w, ow = g.ow;
    const bool narrow_index = h * w <= std::numeric_limits<int32_t>::max();
    // Outputs [lo[j], hi[j]) of a row have tap column j's input column ox * sx - pad_x + j
    // inside the row: the same for every row, so computed once. (Two divisions per tap and row
    // were a tenth of the stem's pool.)
    std::vector<int64_t> lo(kx), hi(kx);
    for (int64_t j = 0; j < kx; ++j) {
      lo[j] = std::min(ow, std::max<int64_t>(0, (pad_x - j + sx - 1) / sx));
      hi[j] = std::max(lo[j], std::min(ow, (w - 1 + pad_x - j) / sx + 1));
    }
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      std::vector<C> in_buf, out_buf;
      std::vector<int32_t> row_index(ow);
      for (int64_t pl = p0; pl < p1; ++pl) {
        const C* xp = plane_in(x + pl * h * w, h * w, in_buf);
        C* yp = plane_out(y + pl * g.oh * ow, g.oh * ow, false, out_buf);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t* out_index = idx + (pl * g.oh + oy) * ow;
          auto scan = [&](auto* __restrict ir) {
            using I = std::remove_reference_t<decltype(*ir)>;
            C* __restrict yr = yp + oy * ow;
            for (int64_t ox = 0; ox < ow; ++ox) {
              yr[ox] = -std::numeric_limits<C>::infinity();
              ir[ox] = -1;
            }
            for (int64_t i = 0; i < ky; ++i) {
              const int64_t iy = oy * sy - pad_y + i;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < kx; ++j) {
                const C* in = xp + iy * w - pad_x + j;  // in[ox * sx]
                const I at0 = static_cast<I>(iy * w - pad_x + j);
                if (sx == 2) {
                  max_tap<2>(in, yr, ir, at0, I{2}, lo[j], hi[j]);
                } else {
                  max_tap<0>(in, yr, ir, at0, static_cast<I>(sx), lo[j], hi[j]);
                }
              }
            }
          };
          if (narrow_index) {
            scan(row_index.data());
            std::copy(row_index.begin(), row_index.end(), out_index);
          } else {
            scan(out_index);
          }
        }
        store_plane(yp, y + pl * g.oh * ow, g.oh * ow);
      }
    });
  });
}

void CpuBackend::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                                     const Tensor& grad_in) {
  const Planes g = planes(grad_in, grad_out);
  const int64_t* idx = indices.data<int64_t>();
  if (!grad_in.is_contiguous()) {  // channels-last (Backend::channels_last)
    TS_DISPATCH_FLOATING(grad_out.dtype(), "max_pool2d_backward", [&] {
      max_pool2d_backward_channels_last<scalar_t, compute_t<scalar_t>>(
          grad_out.data<scalar_t>(), idx, grad_in.data<scalar_t>(), grad_in.size(0),
          grad_in.size(1), g);
    });
    return;
  }
  TS_DISPATCH_FLOATING(grad_out.dtype(), "max_pool2d_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* dy = grad_out.data<scalar_t>();
    scalar_t* dx = grad_in.data<scalar_t>();
    // Each plane is zeroed here, just before its sums, while it stays in cache: a zero-fill of
    // the whole tensor first was a pass of its own and left the planes cold (the stem's pool
    // backward took 1.8x the time). f16/bf16: the plane's sums in f32, rounded once at the end
    // (as the f32 pass rounds).
    parallel_for(g.count, 1, [&](int64_t p0, int64_t p1) {
      std::vector<C> dy_buf, dx_buf;
      for (int64_t pl = p0; pl < p1; ++pl) {
        const int64_t first = pl * g.oh * g.ow, in_plane = g.h * g.w;
        const C* dyp = plane_in(dy + first, g.oh * g.ow, dy_buf);
        C* dxp = plane_out(dx + pl * in_plane, in_plane, false, dx_buf);
        std::fill(dxp, dxp + in_plane, C(0));
        for (int64_t o = 0; o < g.oh * g.ow; ++o) {
          if (idx[first + o] >= 0) dxp[idx[first + o]] += dyp[o];
        }
        store_plane(dxp, dx + pl * in_plane, in_plane);
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
