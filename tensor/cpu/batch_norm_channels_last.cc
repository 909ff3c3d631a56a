// Batch norm on channels-last activations: [N, C, S] with strides [S*C, 1, C], so the tensor
// is M = N*S rows of C channels, one row per pixel (batch_norm.cc has the formulas and the
// NCHW kernels; batch_norm_channels_last.h says when these run).
//
// A channel's values are strided by C here, so the per-channel sums run across a row's
// channels at once: a block of kRows rows adds into one f32 (f64 for f64) accumulator per
// channel, and the blocks' sums are added in block order in f64. Blocks have a fixed size, so
// the result does not depend on the thread count. The elementwise passes work a row at a time
// with per-channel scale and shift vectors; bf16 and f16 rows are widened to f32 a segment of
// kBf16Block channels at a time.
#include "tensor/cpu/batch_norm_channels_last.h"

#include <algorithm>
#include <vector>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kRows = 256;

struct Rows {
  int64_t m, c;  // rows (pixels) and channels
};
Rows rows_of(const Tensor& x) { return {x.size(0) * x.size(2), x.size(1)}; }

// The arithmetic type: f64 for f64, else f32.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Channels [c0, c0 + n) of a row as Acc values: the row itself for f32 and f64, else widened.
template <typename T>
const Acc<T>* load(const T* p, Acc<T>* buf, int64_t n) {
  if constexpr (kBlockWidened<T>) {
    widen(p, buf, n);
    return buf;
  } else {
    return p;
  }
}

template <typename T>
void store(const Acc<T>* v, T* p, int64_t n) {
  if constexpr (kBlockWidened<T>) narrow(v, p, n);
}

// The row's output buffer: the row itself for f32 and f64, else `buf` (stored by store()).
template <typename T>
Acc<T>* out_buf(T* p, Acc<T>* buf) {
  if constexpr (kBlockWidened<T>) return buf;
  else return p;
}

// Two per-channel sums over all rows. add_row(r, c0, n, s1, s2) adds row r's channels
// [c0, c0 + n) into s1[0..n), s2[0..n) (Acc accumulators of this block).
template <typename T, typename AddRow>
void channel_sums(const Rows& d, AddRow add_row, std::vector<double>* sum,
                  std::vector<double>* sum2) {
  using A = Acc<T>;
  const int64_t blocks = (d.m + kRows - 1) / kRows;
  std::vector<double> part(static_cast<size_t>(blocks) * d.c * 2);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<A> a1(d.c), a2(d.c);
    for (int64_t b = b0; b < b1; ++b) {
      std::fill(a1.begin(), a1.end(), A(0));
      std::fill(a2.begin(), a2.end(), A(0));
      for (int64_t r = b * kRows; r < std::min(d.m, (b + 1) * kRows); ++r) {
        for (int64_t c0 = 0; c0 < d.c; c0 += kBf16Block) {
          add_row(r, c0, std::min(kBf16Block, d.c - c0), a1.data() + c0, a2.data() + c0);
        }
      }
      double* p = part.data() + b * d.c * 2;
      for (int64_t c = 0; c < d.c; ++c) {
        p[c] = a1[c];
        p[d.c + c] = a2[c];
      }
    }
  });
  sum->assign(d.c, 0.0);
  sum2->assign(d.c, 0.0);
  for (int64_t b = 0; b < blocks; ++b) {
    const double* p = part.data() + b * d.c * 2;
    for (int64_t c = 0; c < d.c; ++c) {
      (*sum)[c] += p[c];
      (*sum2)[c] += p[d.c + c];
    }
  }
}

// fn(r, c0, n): row r's channels [c0, c0 + n), for every row, rows split over the threads.
template <typename F>
void for_each_segment(const Rows& d, F fn) {
  parallel_for(d.m, std::max<int64_t>(1, 4096 / std::max<int64_t>(d.c, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   for (int64_t c0 = 0; c0 < d.c; c0 += kBf16Block) {
                     fn(r, c0, std::min(kBf16Block, d.c - c0));
                   }
                 }
               });
}

}  // namespace

bool is_channels_last_ncs(const Tensor& x) {
  // Size-1 dims may have any stride (views leave them so).
  return x.dim() == 3 && (x.size(1) == 1 || x.stride(1) == 1) &&
         (x.size(2) == 1 || x.stride(2) == x.size(1)) &&
         (x.size(0) == 1 || x.stride(0) == x.size(1) * x.size(2));
}

Tensor empty_channels_last_ncs(const Tensor& like) {
  return empty({like.size(0), like.size(2), like.size(1)}, like.options()).permute({0, 2, 1});
}

void batch_norm_stats_channels_last(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const Rows d = rows_of(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using A = Acc<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    std::vector<double> sum, sum_sq;
    channel_sums<scalar_t>(
        d,
        [&](int64_t r, int64_t c0, int64_t n, A* s1, A* s2) {
          A buf[kBf16Block];
          const A* v = load(px + r * d.c + c0, buf, n);
          for (int64_t j = 0; j < n; ++j) {
            s1[j] += v[j];
            s2[j] += v[j] * v[j];
          }
        },
        &sum, &sum_sq);
    A* pm = mean.data<A>();
    A* pv = var.data<A>();
    const double count = static_cast<double>(d.m);
    for (int64_t c = 0; c < d.c; ++c) {
      const double m = sum[c] / count;
      pm[c] = A(m);
      pv[c] = A(std::max(0.0, sum_sq[c] / count - m * m));
    }
  });
}

void batch_norm_apply_channels_last(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                    const Tensor& weight, const Tensor& bias,
                                    const Tensor& residual, bool relu, const Tensor& out) {
  const Rows d = rows_of(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using A = Acc<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pr = residual.defined() ? residual.data<scalar_t>() : nullptr;
    scalar_t* py = out.data<scalar_t>();
    const A* pm = mean.data<A>();
    const A* pi = invstd.data<A>();
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    const A* pb = bias.defined() ? bias.data<A>() : nullptr;
    // y = x * scale + shift, with scale = w * invstd and shift = b - mean * scale (as NCHW).
    std::vector<A> scale(d.c), shift(d.c);
    for (int64_t c = 0; c < d.c; ++c) {
      scale[c] = (pw ? pw[c] : A(1)) * pi[c];
      shift[c] = (pb ? pb[c] : A(0)) - pm[c] * scale[c];
    }
    for_each_segment(d, [&](int64_t r, int64_t c0, int64_t n) {
      A xb[kBf16Block], rb[kBf16Block], yb[kBf16Block];
      const int64_t at = r * d.c + c0;
      const A* xv = load(px + at, xb, n);
      const A* rv = pr ? load(pr + at, rb, n) : nullptr;
      A* yv = out_buf(py + at, yb);
      const A* sc = scale.data() + c0;
      const A* sh = shift.data() + c0;
      if (rv) {
        for (int64_t j = 0; j < n; ++j) {
          const A v = xv[j] * sc[j] + sh[j] + rv[j];
          yv[j] = relu ? (v > A(0) ? v : A(0)) : v;
        }
      } else if (relu) {
        for (int64_t j = 0; j < n; ++j) {
          const A v = xv[j] * sc[j] + sh[j];
          yv[j] = v > A(0) ? v : A(0);
        }
      } else {
        for (int64_t j = 0; j < n; ++j) yv[j] = xv[j] * sc[j] + sh[j];
      }
      store(yv, py + at, n);
    });
  });
}

void batch_norm_backward_channels_last(const Tensor& grad_out, const Tensor& relu_out,
                                       const Tensor& masked, const Tensor& x, const Tensor& mean,
                                       const Tensor& invstd, const Tensor& weight, bool training,
                                       const Tensor& grad_in, const Tensor& grad_weight,
                                       const Tensor& grad_bias) {
  const Rows d = rows_of(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    using A = Acc<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pg = grad_out.data<scalar_t>();
    const scalar_t* py = relu_out.defined() ? relu_out.data<scalar_t>() : nullptr;
    scalar_t* pgm = masked.defined() ? masked.data<scalar_t>() : nullptr;
    const A* pm = mean.data<A>();
    const A* pi = invstd.data<A>();
    const A* pw = weight.defined() ? weight.data<A>() : nullptr;
    // The gradient's segment as A values: grad_out, or under the ReLU grad_out * (out > 0),
    // made (and written to `masked`) in the reduction pass, read back from there after it.
    const auto masked_segment = [&](int64_t at, int64_t n, A* gb, A* yb, A* mb) -> const A* {
      const A* g = load(pg + at, gb, n);
      if (!py) return g;
      const A* y = load(py + at, yb, n);
      A* m = out_buf(pgm + at, mb);
      // NaN in out masks as relu_backward does (out > 0 is false for NaN).
      for (int64_t j = 0; j < n; ++j) m[j] = y[j] > A(0) ? g[j] : A(0);
      store(m, pgm + at, n);
      return m;
    };
    std::vector<double> sum_g, sum_gx;
    channel_sums<scalar_t>(
        d,
        [&](int64_t r, int64_t c0, int64_t n, A* s1, A* s2) {
          A gb[kBf16Block], yb[kBf16Block], mb[kBf16Block], xb[kBf16Block];
          const int64_t at = r * d.c + c0;
          const A* g = masked_segment(at, n, gb, yb, mb);
          const A* xv = load(px + at, xb, n);
          const A* m = pm + c0;
          for (int64_t j = 0; j < n; ++j) {
            s1[j] += g[j];
            s2[j] += g[j] * (xv[j] - m[j]);
          }
        },
        &sum_g, &sum_gx);
    for (int64_t c = 0; c < d.c; ++c) sum_gx[c] *= pi[c];
    if (grad_weight.defined()) {
      A* gw = grad_weight.data<A>();
      A* gbias = grad_bias.data<A>();
      for (int64_t c = 0; c < d.c; ++c) {
        gw[c] = A(sum_gx[c]);
        gbias[c] = A(sum_g[c]);
      }
    }
    if (!grad_in.defined()) return;
    scalar_t* pdx = grad_in.data<scalar_t>();
    const scalar_t* pgrad = py ? pgm : pg;
    const double count = static_cast<double>(d.m);
    // dx = k * (g - mean_g - (x - mean) * proj), k = w * invstd; eval: dx = k * g.
    std::vector<A> k(d.c), mean_g(d.c), proj(d.c);
    for (int64_t c = 0; c < d.c; ++c) {
      k[c] = (pw ? pw[c] : A(1)) * pi[c];
      mean_g[c] = training ? A(sum_g[c] / count) : A(0);
      proj[c] = training ? A(sum_gx[c] / count) * pi[c] : A(0);
    }
    for_each_segment(d, [&](int64_t r, int64_t c0, int64_t n) {
      A gb[kBf16Block], xb[kBf16Block], db[kBf16Block];
      const int64_t at = r * d.c + c0;
      const A* g = load(pgrad + at, gb, n);
      A* dv = out_buf(pdx + at, db);
      if (training) {
        const A* xv = load(px + at, xb, n);
        for (int64_t j = 0; j < n; ++j) {
          const int64_t c = c0 + j;
          dv[j] = k[c] * (g[j] - mean_g[c] - (xv[j] - pm[c]) * proj[c]);
        }
      } else {
        for (int64_t j = 0; j < n; ++j) dv[j] = g[j] * k[c0 + j];
      }
      store(dv, pdx + at, n);
    });
  });
}

}  // namespace cpu
}  // namespace tessera
