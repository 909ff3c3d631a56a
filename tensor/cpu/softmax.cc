// CPU softmax and log-softmax over the rows of a contiguous [rows, n] matrix, and the fused
// cross-entropy built on the log-softmax.
//
// Forward subtracts the row maximum before exponentiating (exp never overflows).
// Backward, with y the output and g its gradient:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
// Cross-entropy with q = (1 - eps) one_hot(t) + eps / C: loss = -(1 - eps) logp[t] -
// eps / C * sum(logp), and d loss / dx = exp(logp) - q.
#include <cmath>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {
// Rows of n values per parallel task: about 4096 values each.
int64_t rows_per_task(int64_t n) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)); }
}  // namespace

void CpuBackend::softmax(const Tensor& in, const Tensor& out, bool log) {
  const int64_t rows = in.size(0), n = in.size(1);
  TS_DISPATCH_FLOATING(in.dtype(), "softmax", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* x = static_cast<const scalar_t*>(in.raw_data());
    scalar_t* y = static_cast<scalar_t*>(out.raw_data());
    parallel_for(rows, rows_per_task(n),
                 [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* xr = x + r * n;
        scalar_t* yr = y + r * n;
        C m = C(xr[0]);
        for (int64_t j = 1; j < n; ++j) m = std::max(m, C(xr[j]));
        double total = 0;
        for (int64_t j = 0; j < n; ++j) total += std::exp(C(xr[j]) - m);
        if (log) {
          const C lse = m + C(std::log(total));
          for (int64_t j = 0; j < n; ++j) yr[j] = scalar_t(C(xr[j]) - lse);
        } else {
          const C inv = C(1.0 / total);
          for (int64_t j = 0; j < n; ++j) yr[j] = scalar_t(std::exp(C(xr[j]) - m) * inv);
        }
      }
    });
  });
}

void CpuBackend::softmax_backward(const Tensor& grad_out, const Tensor& out,
                                  const Tensor& grad_in, bool log) {
  const int64_t rows = out.size(0), n = out.size(1);
  TS_DISPATCH_FLOATING(out.dtype(), "softmax_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* g = static_cast<const scalar_t*>(grad_out.raw_data());
    const scalar_t* y = static_cast<const scalar_t*>(out.raw_data());
    scalar_t* dx = static_cast<scalar_t*>(grad_in.raw_data());
    parallel_for(rows, rows_per_task(n),
                 [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* gr = g + r * n;
        const scalar_t* yr = y + r * n;
        scalar_t* dr = dx + r * n;
        double dot = 0;
        if (log) {
          for (int64_t j = 0; j < n; ++j) dot += C(gr[j]);
          for (int64_t j = 0; j < n; ++j) dr[j] = scalar_t(C(gr[j]) - std::exp(C(yr[j])) * C(dot));
        } else {
          for (int64_t j = 0; j < n; ++j) dot += C(gr[j]) * C(yr[j]);
          for (int64_t j = 0; j < n; ++j) dr[j] = scalar_t(C(yr[j]) * (C(gr[j]) - C(dot)));
        }
      }
    });
  });
}

void CpuBackend::cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing,
                               const Tensor& log_probs, const Tensor& loss) {
  softmax(logits, log_probs, /*log=*/true);
  const int64_t rows = logits.size(0), n = logits.size(1);
  const int64_t* t = target.data<int64_t>();
  TS_DISPATCH_FLOATING(logits.dtype(), "cross_entropy", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* lp = static_cast<const scalar_t*>(log_probs.raw_data());
    scalar_t* out = static_cast<scalar_t*>(loss.raw_data());
    parallel_for(rows, rows_per_task(n),
                 [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* row = lp + r * n;
        double total = 0;
        if (label_smoothing > 0) {
          for (int64_t j = 0; j < n; ++j) total += C(row[j]);
        }
        out[r] = scalar_t(C(-(1 - label_smoothing) * double(C(row[t[r]])) -
                            label_smoothing / n * total));
      }
    });
  });
}

void CpuBackend::cross_entropy_backward(const Tensor& log_probs, const Tensor& target,
                                        const Tensor& row_grad, double label_smoothing,
                                        const Tensor& grad_logits) {
  const int64_t rows = log_probs.size(0), n = log_probs.size(1);
  const int64_t* t = target.data<int64_t>();
  TS_DISPATCH_FLOATING(log_probs.dtype(), "cross_entropy_backward", [&] {
    using C = compute_t<scalar_t>;
    const scalar_t* lp = static_cast<const scalar_t*>(log_probs.raw_data());
    const scalar_t* g = static_cast<const scalar_t*>(row_grad.raw_data());
    scalar_t* dx = static_cast<scalar_t*>(grad_logits.raw_data());
    const C off = C(label_smoothing / n), on = C(1 - label_smoothing) + off;
    parallel_for(rows, rows_per_task(n),
                 [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const C scale = C(g[r]);
        for (int64_t j = 0; j < n; ++j) {
          const C q = j == t[r] ? on : off;
          dx[r * n + j] = scalar_t((std::exp(C(lp[r * n + j])) - q) * scale);
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace tessera
