// CPU batch norm on [N, C, S] (S = H*W); per-channel statistics in f32 (f64 for f64 inputs).
//
// With xhat = (x - mean) * invstd and M = N*S values per channel, training-mode backward is
//   dbias   = sum(g)
//   dweight = sum(g * xhat)
//   dx      = weight * invstd * (g - dbias / M - xhat * dweight / M)
// (eval mode: mean and invstd are constants, dx = g * weight * invstd).
#include <algorithm>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {
struct NCS {
  int64_t n, c, s;
};
NCS ncs(const Tensor& x) { return {x.size(0), x.size(1), x.size(2)}; }

// Row sums in kLanes independent partial sums of the compute type (f32, or f64 for f64), added
// into f64 at the end of each row: the lanes vectorize (no reassociation needed) and there is no
// chain of dependent f64 additions, while each partial sum covers only s / kLanes values.
constexpr int kLanes = 16;

// sum += sum(f(j)), sum2 += sum(g(j)) over j in [0, n).
template <typename C, typename F, typename G>
void add_row_sums(int64_t n, F f, G g, double* sum, double* sum2) {
  C a[kLanes] = {}, b[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      a[l] += f(j + l);
      b[l] += g(j + l);
    }
  }
  double s1 = 0, s2 = 0;
  for (int l = 0; l < kLanes; ++l) {
    s1 += a[l];
    s2 += b[l];
  }
  for (; j < n; ++j) {
    s1 += f(j);
    s2 += g(j);
  }
  *sum += s1;
  *sum2 += s2;
}
}  // namespace

void CpuBackend::batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using S = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    using C = compute_t<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    S* pm = mean.data<S>();
    S* pv = var.data<S>();
    const double count = static_cast<double>(d.n * d.s);
    parallel_for(d.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        // One pass: sum and sum of squares, per row in the compute type, across rows in f64
        // (activations are O(1), so E[x^2] - E[x]^2 keeps f32 precision).
        double sum = 0, sum_sq = 0;
        for (int64_t i = 0; i < d.n; ++i) {
          const scalar_t* row = px + (i * d.c + c) * d.s;
          add_row_sums<C>(
              d.s, [&](int64_t j) { return C(row[j]); },
              [&](int64_t j) { return C(row[j]) * C(row[j]); }, &sum, &sum_sq);
        }
        const double m = sum / count;
        pm[c] = S(m);
        pv[c] = S(std::max(0.0, sum_sq / count - m * m));
      }
    });
  });
}

void CpuBackend::batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                  const Tensor& weight, const Tensor& bias, const Tensor& out) {
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using S = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* py = out.data<scalar_t>();
    const S* pm = mean.data<S>();
    const S* pi = invstd.data<S>();
    const S* pw = weight.defined() ? weight.data<S>() : nullptr;
    const S* pb = bias.defined() ? bias.data<S>() : nullptr;
    parallel_for(d.n * d.c, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t c = t % d.c;
        // y = x * scale + shift, with scale = w * invstd and shift = b - mean * scale.
        const S scale = (pw ? pw[c] : S(1)) * pi[c];
        const S shift = (pb ? pb[c] : S(0)) - pm[c] * scale;
        const scalar_t* row = px + t * d.s;
        scalar_t* dst = py + t * d.s;
        for (int64_t j = 0; j < d.s; ++j) dst[j] = scalar_t(S(row[j]) * scale + shift);
      }
    });
  });
}

void CpuBackend::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                     const Tensor& invstd, const Tensor& weight, bool training,
                                     const Tensor& grad_in, const Tensor& grad_weight,
                                     const Tensor& grad_bias) {
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    using S = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    using C = compute_t<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pg = grad_out.data<scalar_t>();
    const S* pm = mean.data<S>();
    const S* pi = invstd.data<S>();
    const S* pw = weight.defined() ? weight.data<S>() : nullptr;
    std::vector<double> sum_g(d.c), sum_gxhat(d.c);
    parallel_for(d.c, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double sg = 0, sgx = 0;
        const C m = C(pm[c]);
        for (int64_t i = 0; i < d.n; ++i) {
          const scalar_t* xr = px + (i * d.c + c) * d.s;
          const scalar_t* gr = pg + (i * d.c + c) * d.s;
          add_row_sums<C>(
              d.s, [&](int64_t j) { return C(gr[j]); },
              [&](int64_t j) { return C(gr[j]) * (C(xr[j]) - m); }, &sg, &sgx);
        }
        sum_g[c] = sg;
        sum_gxhat[c] = sgx * pi[c];
      }
    });
    if (grad_weight.defined()) {
      S* gw = grad_weight.data<S>();
      S* gb = grad_bias.data<S>();
      for (int64_t c = 0; c < d.c; ++c) {
        gw[c] = S(sum_gxhat[c]);
        gb[c] = S(sum_g[c]);
      }
    }
    if (!grad_in.defined()) return;
    scalar_t* pdx = grad_in.data<scalar_t>();
    const double count = static_cast<double>(d.n * d.s);
    parallel_for(d.n * d.c, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t c = t % d.c;
        const S w = pw ? pw[c] : S(1);
        const scalar_t* xr = px + t * d.s;
        const scalar_t* gr = pg + t * d.s;
        scalar_t* dr = pdx + t * d.s;
        if (!training) {
          const S k = w * pi[c];
          for (int64_t j = 0; j < d.s; ++j) dr[j] = scalar_t(static_cast<S>(static_cast<C>(gr[j])) * k);
          continue;
        }
        const S k = w * pi[c];
        const S mean_g = S(sum_g[c] / count);
        const S proj = S(sum_gxhat[c] / count) * pi[c];  // multiplies (x - mean)
        for (int64_t j = 0; j < d.s; ++j) {
          const S g = static_cast<S>(static_cast<C>(gr[j]));
          const S centered = static_cast<S>(static_cast<C>(xr[j])) - pm[c];
          dr[j] = scalar_t(k * (g - mean_g - centered * proj));
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace tessera
