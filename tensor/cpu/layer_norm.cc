// CPU layer norm over the rows of contiguous [rows, n] (llm.c's layernorm_forward/backward).
//
// Forward, one row x at a time (it stays in L1 across the passes):
//   mean = sum(x) / n,  var = sum((x - mean)^2) / n   (two passes: no E[x^2] - E[x]^2
//                                                      cancellation on rows with a large mean)
//   rstd = 1 / sqrt(var + eps),  y = (x - mean) * rstd * weight + bias
// mean and rstd are saved, so the backward never recomputes the statistics.
//
// Backward, with xhat = (x - mean) * rstd and dxhat = g * weight (g the output's gradient):
//   dbias   += g
//   dweight += g * xhat
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
// The two means are the gradient flowing back through mean and rstd, which every element of
// the row fed. Why dweight and dbias accumulate with +=: every row (every token of every
// sequence) is normalized with the same weight and bias, so by the chain rule their gradient
// is the sum of each row's contribution, added row after row into one buffer. dx, in
// contrast, belongs to its row alone and is written with =.
//
// Threads split the rows. The parameter sums go by blocks of kRowsPerBlock rows, each block
// into its own buffer, added in block order (block_sums.h): the same bits on any thread count.
// f16/bf16 rows are widened into f32 buffers and computed as f32; f64 rows are computed in f64.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/block_sums.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int kLanes = 16;
constexpr int64_t kRowsPerBlock = 32;

// sum over j in [0, n) of f(j), in kLanes independent partial sums: one long chain of dependent
// additions would keep the loop scalar (floating-point addition does not reassociate), while
// the lanes are one vector register's worth the compiler can keep and add in parallel.
template <typename C, typename F>
inline C lane_sum(int64_t n, F f) {
  C acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += f(j + l);
  }
  C s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += f(j);
  return s;
}

// A row of storage type T as compute type C: the row itself when T is C, else widened into
// `buf` (n values).
template <typename C, typename T>
inline const C* as_compute(const T* row, int64_t n, C* buf) {
  if constexpr (std::is_same_v<T, C>) {
    return row;
  } else {
    widen(row, buf, n);
    return buf;
  }
}

// Where a row of results in C goes: straight to the output when T is C, else to `buf`, which
// store_row() then rounds into the output.
template <typename C, typename T>
inline C* compute_dst(T* row, C* buf) {
  if constexpr (std::is_same_v<T, C>) {
    return row;
  } else {
    return buf;
  }
}
template <typename C, typename T>
inline void store_row(const C* buf, T* row, int64_t n) {
  if constexpr (!std::is_same_v<T, C>) narrow(buf, row, n);
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& out, const Tensor& mean,
                            const Tensor& rstd) {
  const int64_t rows = x.size(0), n = x.size(1);
  TS_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* py = out.data<scalar_t>();
    const C* w = weight.data<C>();
    const C* b = bias.data<C>();
    C* pm = mean.data<C>();
    C* pr = rstd.data<C>();
    // At least ~16K values per task, so that small calls stay on one thread.
    parallel_for(rows, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
      std::vector<C> xbuf(std::is_same_v<scalar_t, C> ? 0 : n);
      std::vector<C> ybuf(std::is_same_v<scalar_t, C> ? 0 : n);
      for (int64_t r = r0; r < r1; ++r) {
        const C* xr = as_compute(px + r * n, n, xbuf.data());
        const C m = lane_sum<C>(n, [&](int64_t j) { return xr[j]; }) / C(n);
        const C var = lane_sum<C>(n, [&](int64_t j) {
                        const C d = xr[j] - m;
                        return d * d;
                      }) / C(n);
        const C rs = C(1) / std::sqrt(var + C(eps));
        C* yr = compute_dst(py + r * n, ybuf.data());
        for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) * rs * w[j] + b[j];
        store_row(yr, py + r * n, n);
        pm[r] = m;
        pr[r] = rs;
      }
    });
  });
}

void CpuBackend::layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& weight,
                                     const Tensor& grad_in, const Tensor& grad_weight,
                                     const Tensor& grad_bias) {
  const int64_t rows = x.size(0), n = x.size(1);
  TS_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pg = grad_out.data<scalar_t>();
    scalar_t* pdx = grad_in.defined() ? grad_in.data<scalar_t>() : nullptr;
    const C* w = weight.data<C>();
    const C* pm = mean.data<C>();
    const C* pr = rstd.data<C>();
    const bool params = grad_weight.defined() || grad_bias.defined();
    // Rows [r0, r1): dx where asked for, and (params) the rows' dweight into dw[0, n) and
    // dbias into dw[n, 2n).
    const auto backward_rows = [&](int64_t r0, int64_t r1, C* dw) {
      const bool widened = !std::is_same_v<scalar_t, C>;
      std::vector<C> xbuf(widened ? n : 0), gbuf(widened ? n : 0), dxbuf(widened ? n : 0);
      for (int64_t r = r0; r < r1; ++r) {
        const C* xr = as_compute(px + r * n, n, xbuf.data());
        const C* gr = as_compute(pg + r * n, n, gbuf.data());
        const C m = pm[r], rs = pr[r];
        if (params) {
          C* dweight = dw;
          C* dbias = dw + n;
          for (int64_t j = 0; j < n; ++j) {
            dweight[j] += gr[j] * (xr[j] - m) * rs;
            dbias[j] += gr[j];
          }
        }
        if (pdx == nullptr) continue;
        const C mean_dxhat = lane_sum<C>(n, [&](int64_t j) { return gr[j] * w[j]; }) / C(n);
        const C mean_dxhat_xhat =
            lane_sum<C>(n, [&](int64_t j) { return gr[j] * w[j] * (xr[j] - m) * rs; }) / C(n);
        C* dxr = compute_dst(pdx + r * n, dxbuf.data());
        for (int64_t j = 0; j < n; ++j) {
          const C xhat = (xr[j] - m) * rs;
          dxr[j] = rs * (gr[j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat);
        }
        store_row(dxr, pdx + r * n, n);
      }
    };
    if (!params) {
      parallel_for(rows, std::max<int64_t>(1, 16384 / n),
                   [&](int64_t r0, int64_t r1) { backward_rows(r0, r1, nullptr); });
      return;
    }
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    std::vector<C> sums(2 * n);
    sum_over_blocks<C>(
        blocks, 2 * n,
        [&](int64_t b0, int64_t b1, C* partial) {
          for (int64_t blk = b0; blk < b1; ++blk) {
            backward_rows(blk * kRowsPerBlock, std::min(rows, (blk + 1) * kRowsPerBlock),
                          partial + blk * 2 * n);
          }
        },
        sums.data());
    if (grad_weight.defined()) std::copy(sums.begin(), sums.begin() + n, grad_weight.data<C>());
    if (grad_bias.defined()) std::copy(sums.begin() + n, sums.end(), grad_bias.data<C>());
  });
}

}  // namespace cpu
}  // namespace tessera
