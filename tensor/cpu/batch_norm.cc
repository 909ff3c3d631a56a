// CPU batch norm on [N, C, S] (S = H*W); per-channel statistics in f32 (f64 for f64 inputs).
//
// With xhat = (x - mean) * invstd and M = N*S values per channel, training-mode backward is
//   dbias   = sum(g)
//   dweight = sum(g * xhat)
//   dx      = weight * invstd * (g - dbias / M - xhat * dweight / M)
// (eval mode: mean and invstd are constants, dx = g * weight * invstd).
//
// Batch norm + ReLU (+ residual), the tail of a residual block, fuses into these passes:
// forward, the apply pass computes y = max(0, x * scale + shift [+ residual]) and writes y
// alone (unfused: the normalized tensor, the sum, the ReLU's output, each a pass of its own);
// backward, the ReLU's mask comes from the saved y (y > 0): the reduction pass makes the masked
// gradient gm = g * (y > 0) a row at a time and sums that row while it is in cache, and the
// gradient pass reads gm back; both run batch norm's backward code unchanged. gm is the
// residual's gradient, so with a residual it is written there; without one it is written into
// grad_in, and the gradient pass overwrites each row of it in place. (Writing dx over lines it
// has just read costs no memory traffic of its own; a separate fresh tensor costs a read for
// ownership and a write-back: the stem's backward took 1.24x the time. Masking again in the
// gradient pass instead of keeping gm measured slower: it reads g and y twice.)
#include <algorithm>
#include <vector>

#include "tensor/cpu/batch_norm_blocked.h"
#include "tensor/cpu/batch_norm_channels_last.h"
#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/simd_vec.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {
struct NCS {
  int64_t n, c, s;
};
NCS ncs(const Tensor& x) { return {x.size(0), x.size(1), x.size(2)}; }

// Row sums: 16 lanes of partial sums in the compute type (f32, or f64 for f64), added across
// lanes and into f64 at the end of each row, so there is no chain of dependent f64 additions
// and each partial sum covers only s / 16 values. f32 rows use explicit vectors; the other
// types a lane array the compiler may vectorize.
constexpr int kLanes = simd::kLanes;

// p[0] as the compute type C, or (f32 only) the 16 values from p as one vector, as `like` is.
template <typename C, typename T, typename Like>
TS_SIMD_INLINE auto load_as(const T* p, Like) {
  if constexpr (std::is_same_v<Like, simd::Vec>) {
    return simd::load(p);
  } else {
    return C(p[0]);
  }
}

// sum += sum(f(j)), sum2 += sum(g(j)) over j in [0, n) of a row of T. f(j, like) and
// g(j, like) return the summand at j when like is a C, and (T = float) the 16 from j when like
// is a simd::Vec.
template <typename T, typename C, typename F, typename G>
void add_row_sums(int64_t n, F f, G g, double* sum, double* sum2) {
  int64_t j = 0;
  double s1 = 0, s2 = 0;
  if constexpr (std::is_same_v<T, float>) {
    simd::Vec a = {}, b = {};
    for (; j + kLanes <= n; j += kLanes) {
      a += f(j, simd::Vec{});
      b += g(j, simd::Vec{});
    }
    s1 = simd::sum_lanes<kLanes>(a);
    s2 = simd::sum_lanes<kLanes>(b);
  } else {
    C a[kLanes] = {}, b[kLanes] = {};
    for (; j + kLanes <= n; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        a[l] += f(j + l, C(0));
        b[l] += g(j + l, C(0));
      }
    }
    for (int l = 0; l < kLanes; ++l) {
      s1 += a[l];
      s2 += b[l];
    }
  }
  for (; j < n; ++j) {
    s1 += f(j, C(0));
    s2 += g(j, C(0));
  }
  *sum += s1;
  *sum2 += s2;
}

// Two sums per channel over all images: row_sums(i, c, &sum, &sum2) adds row (i, c)'s
// contributions. Threads split the channels; each thread visits its channels' rows image by
// image, so the reads stream through runs of consecutive rows (a channel at a time would jump a
// whole image between rows of as little as 196 bytes at 7x7), and each channel adds its images
// in order, so the result does not depend on the thread count. (Splitting the images instead,
// in blocks of 8, left a batch of 8 on one thread: ImageNet ResNets train at such batches.)
template <typename RowSums>
void channel_sums(const NCS& d, RowSums row_sums, std::vector<double>* sum,
                  std::vector<double>* sum2) {
  sum->assign(d.c, 0.0);
  sum2->assign(d.c, 0.0);
  double* s1 = sum->data();
  double* s2 = sum2->data();
  // At least ~16K values per task, so small layers do not pay for a parallel region.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d.n * d.s));
  parallel_for(d.c, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < d.n; ++i) {
      for (int64_t c = c0; c < c1; ++c) row_sums(i, c, &s1[c], &s2[c]);
    }
  });
}

// Channels per block when a kernel reads each channel's rows twice (batch norm's backward: the
// reduction pass, then the gradient pass): as many as keep the block's rows of all images
// (bytes_per_value per position: 2 * sizeof(T) for x and the gradient) within kCachedBytes, a
// quarter of this CPU's per-core L2, and at most an eighth of the channels, so both threads get
// blocks. On the Xeon with AMX (2 MiB of L2 a core; one thread, ResNet-50 at batch 8) the
// backward rows of layer_bench took 89-93 ms a step against 100-103 with the passes over the
// whole tensor one after the other, and 90-92 with blocks of 1 MiB. (The forward's statistics
// and apply passes blocked the same way measured no faster, 57-60 ms against 56-57.)
constexpr int64_t kCachedBytes = 1 << 19;
int64_t cached_channels(const NCS& d, int64_t bytes_per_value) {
  const int64_t fit = kCachedBytes / std::max<int64_t>(1, d.n * d.s * bytes_per_value);
  return std::clamp<int64_t>(std::min(fit, (d.c + 7) / 8), 1, std::max<int64_t>(1, d.c));
}
}  // namespace

void CpuBackend::batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  if (x.is_channels_blocked()) return batch_norm_stats_blocked(x, mean, var);
  if (runs_channels_last(x)) {
    return batch_norm_stats_channels_last(x, mean, var);
  }
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using S = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    using C = compute_t<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    S* pm = mean.data<S>();
    S* pv = var.data<S>();
    const double count = static_cast<double>(d.n * d.s);
    // One pass: sum and sum of squares, per row in the compute type, across rows in f64
    // (activations are O(1), so E[x^2] - E[x]^2 keeps f32 precision).
    std::vector<double> sum, sum_sq;
    channel_sums(
        d,
        [&](int64_t i, int64_t c, double* s1, double* s2) {
          const scalar_t* row = px + (i * d.c + c) * d.s;
          const auto square = [](auto v) { return v * v; };
          if constexpr (kBlockWidened<scalar_t>) {
            // Widened a block at a time (bf16_block.h, f16_block.h), then the f32 vector sums.
            float buf[kBf16Block];
            for (int64_t j0 = 0; j0 < d.s; j0 += kBf16Block) {
              const int64_t m = std::min(kBf16Block, d.s - j0);
              widen(row + j0, buf, m);
              add_row_sums<float, float>(
                  m, [&](int64_t j, auto like) { return load_as<float>(buf + j, like); },
                  [&](int64_t j, auto like) { return square(load_as<float>(buf + j, like)); },
                  s1, s2);
            }
          } else {
            add_row_sums<scalar_t, C>(
                d.s, [&](int64_t j, auto like) { return load_as<C>(row + j, like); },
                [&](int64_t j, auto like) { return square(load_as<C>(row + j, like)); }, s1, s2);
          }
        },
        &sum, &sum_sq);
    for (int64_t c = 0; c < d.c; ++c) {
      const double m = sum[c] / count;
      pm[c] = S(m);
      pv[c] = S(std::max(0.0, sum_sq[c] / count - m * m));
    }
  });
}

namespace {

// One row of the apply pass: dst = x * scale + shift [+ residual], then max(0, .) when kRelu;
// arithmetic in S (f32, or f64 for f64), bf16 and f16 a block at a time through f32 buffers.
template <bool kRelu, bool kResidual, typename T, typename S>
void apply_row(const T* row, const T* res, T* dst, int64_t s, S scale, S shift) {
  if constexpr (kBlockWidened<T>) {
    float buf[kBf16Block], rbuf[kResidual ? kBf16Block : 1];
    for (int64_t j0 = 0; j0 < s; j0 += kBf16Block) {
      const int64_t m = std::min(kBf16Block, s - j0);
      widen(row + j0, buf, m);
      if constexpr (kResidual) widen(res + j0, rbuf, m);
      for (int64_t j = 0; j < m; ++j) {
        float v = buf[j] * scale + shift;
        if constexpr (kResidual) v += rbuf[j];
        if constexpr (kRelu) v = v > 0.0f ? v : 0.0f;
        buf[j] = v;
      }
      narrow(buf, dst + j0, m);
    }
  } else {
    for (int64_t j = 0; j < s; ++j) {
      S v = S(row[j]) * scale + shift;
      if constexpr (kResidual) v += S(res[j]);
      if constexpr (kRelu) v = v > S(0) ? v : S(0);
      dst[j] = T(v);
    }
  }
}

// The apply pass over all rows, for batch_norm_apply (kRelu = false, no residual) and
// batch_norm_apply_relu.
template <bool kRelu>
void apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
           const Tensor& bias, const Tensor& residual, const Tensor& out) {
  if (x.is_channels_blocked()) {
    return batch_norm_apply_blocked(x, mean, invstd, weight, bias, residual, kRelu, out);
  }
  if (runs_channels_last(x)) {
    return batch_norm_apply_channels_last(x, mean, invstd, weight, bias, residual, kRelu, out);
  }
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using S = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    const scalar_t* px = x.data<scalar_t>();
    const scalar_t* pr = residual.defined() ? residual.data<scalar_t>() : nullptr;
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
        const int64_t at = t * d.s;
        if (pr) {
          apply_row<kRelu, true>(px + at, pr + at, py + at, d.s, scale, shift);
        } else {
          apply_row<kRelu, false>(px + at, pr, py + at, d.s, scale, shift);
        }
      }
    });
  });
}

// dst = g * (y > 0) over one row (the ReLU's backward from its output; NaN masks, as
// relu_backward). bf16 and f16 on their bits, in a loop the compiler vectorizes: y > 0 exactly
// when the sign bit is clear and the bits are in [1, +inf's] (above: NaNs).
template <typename T>
void mask_row(const T* g, const T* y, T* dst, int64_t s) {
  if constexpr (kBlockWidened<T>) {
    constexpr uint32_t kInf = std::is_same_v<T, BFloat16> ? 0x7F80u : 0x7C00u;
    const uint16_t* gb = reinterpret_cast<const uint16_t*>(g);
    const uint16_t* yb = reinterpret_cast<const uint16_t*>(y);
    uint16_t* db = reinterpret_cast<uint16_t*>(dst);
    for (int64_t j = 0; j < s; ++j) {
      db[j] = static_cast<uint32_t>(yb[j]) - 1u < kInf ? gb[j] : uint16_t(0);
    }
  } else {
    for (int64_t j = 0; j < s; ++j) dst[j] = y[j] > T(0) ? g[j] : T(0);
  }
}

// f(xb, gb, j0, m) for each block of kBf16Block positions j0.. of the half-precision rows xr and
// gr, widened into the f32 buffers xb and gb (m positions; f may overwrite gb).
template <typename T, typename F>
void for_each_widened_block(const T* xr, const T* gr, int64_t s, F f) {
  float xb[kBf16Block], gb[kBf16Block];
  for (int64_t j0 = 0; j0 < s; j0 += kBf16Block) {
    const int64_t m = std::min(kBf16Block, s - j0);
    widen(xr + j0, xb, m);
    widen(gr + j0, gb, m);
    f(xb, gb, j0, m);
  }
}

// Batch norm's backward (the formulas at the top), with the gradient's rows supplied by the
// caller: sums_row(t) and grad_row(t) return row t = i * C + c of the gradient for the
// reduction pass and for the gradient pass (batch norm: rows of grad_out; batch norm + ReLU:
// rows of the masked gradient, made by sums_row, read by grad_row).
template <typename scalar_t, typename SumsRow, typename GradRow>
void backward(const NCS& d, SumsRow sums_row, GradRow grad_row, const Tensor& x,
              const Tensor& mean, const Tensor& invstd, const Tensor& weight, bool training,
              const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias) {
  using S = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
  using C = compute_t<scalar_t>;
  const scalar_t* px = x.data<scalar_t>();
  const S* pm = mean.data<S>();
  const S* pi = invstd.data<S>();
  const S* pw = weight.defined() ? weight.data<S>() : nullptr;
  // The reduction pass's row (i, c): adds its sum(g) and sum(g * (x - mean)).
  const auto row_sums = [&](int64_t i, int64_t c, double* sg, double* sgx) {
    const C m = C(pm[c]);
    const scalar_t* xr = px + (i * d.c + c) * d.s;
    const scalar_t* gr = sums_row(i * d.c + c);
    if constexpr (kBlockWidened<scalar_t>) {
      for_each_widened_block(xr, gr, d.s, [&](float* xb, float* gb, int64_t, int64_t n) {
        add_row_sums<float, float>(
            n, [&](int64_t j, auto like) { return load_as<float>(gb + j, like); },
            [&](int64_t j, auto like) {
              return load_as<float>(gb + j, like) * (load_as<float>(xb + j, like) - m);
            },
            sg, sgx);
      });
    } else {
      add_row_sums<scalar_t, C>(
          d.s, [&](int64_t j, auto like) { return load_as<C>(gr + j, like); },
          [&](int64_t j, auto like) {
            return load_as<C>(gr + j, like) * (load_as<C>(xr + j, like) - m);
          },
          sg, sgx);
    }
  };
  scalar_t* pdx = grad_in.defined() ? grad_in.data<scalar_t>() : nullptr;
  const double count = static_cast<double>(d.n * d.s);
  // The gradient pass's row (i, c), given its channel's sums.
  const auto grad_row_at = [&](int64_t i, int64_t c, double sg, double sgx) {
    const int64_t t = i * d.c + c;
    const S w = pw ? pw[c] : S(1);
    const scalar_t* xr = px + t * d.s;
    const scalar_t* gr = grad_row(t);
    scalar_t* dr = pdx + t * d.s;
    const S k = w * pi[c];
    if (!training) {
      for (int64_t j = 0; j < d.s; ++j) dr[j] = scalar_t(static_cast<S>(static_cast<C>(gr[j])) * k);
      return;
    }
    const S mean_g = S(sg / count);
    const S proj = S(sgx / count) * pi[c];  // multiplies (x - mean)
    if constexpr (kBlockWidened<scalar_t>) {
      for_each_widened_block(xr, gr, d.s, [&](float* xb, float* gb, int64_t j0, int64_t m) {
        for (int64_t j = 0; j < m; ++j) gb[j] = k * (gb[j] - mean_g - (xb[j] - pm[c]) * proj);
        narrow(gb, dr + j0, m);
      });
    } else {
      for (int64_t j = 0; j < d.s; ++j) {
        const S g = static_cast<S>(static_cast<C>(gr[j]));
        const S centered = static_cast<S>(static_cast<C>(xr[j])) - pm[c];
        dr[j] = scalar_t(k * (g - mean_g - centered * proj));
      }
    }
  };
  // Both passes a block of channels at a time (cached_channels), the reduction pass's rows still
  // in cache when the gradient pass reads them; each block's rows image by image, as
  // channel_sums visits them, so each channel adds its images in order.
  std::vector<double> sum_g(d.c, 0.0), sum_gxhat(d.c, 0.0);
  S* gw = grad_weight.defined() ? grad_weight.data<S>() : nullptr;
  S* gb = grad_weight.defined() ? grad_bias.data<S>() : nullptr;
  const int64_t per_block = cached_channels(d, 2 * sizeof(scalar_t));
  // At least ~16K values per task, so small layers do not pay for a parallel region.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, per_block * d.n * d.s));
  parallel_for((d.c + per_block - 1) / per_block, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t block = b0; block < b1; ++block) {
      const int64_t c0 = block * per_block, c1 = std::min(d.c, c0 + per_block);
      for (int64_t i = 0; i < d.n; ++i) {
        for (int64_t c = c0; c < c1; ++c) row_sums(i, c, &sum_g[c], &sum_gxhat[c]);
      }
      for (int64_t c = c0; c < c1; ++c) {
        sum_gxhat[c] *= pi[c];
        if (gw != nullptr) {
          gw[c] = S(sum_gxhat[c]);
          gb[c] = S(sum_g[c]);
        }
      }
      if (pdx == nullptr) continue;
      for (int64_t i = 0; i < d.n; ++i) {
        for (int64_t c = c0; c < c1; ++c) grad_row_at(i, c, sum_g[c], sum_gxhat[c]);
      }
    }
  });
}

}  // namespace

void CpuBackend::batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                  const Tensor& weight, const Tensor& bias, const Tensor& out) {
  apply<false>(x, mean, invstd, weight, bias, Tensor(), out);
}

void CpuBackend::batch_norm_apply_relu(const Tensor& x, const Tensor& mean,
                                       const Tensor& invstd, const Tensor& weight,
                                       const Tensor& bias, const Tensor& residual,
                                       const Tensor& out) {
  apply<true>(x, mean, invstd, weight, bias, residual, out);
}

void CpuBackend::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                     const Tensor& invstd, const Tensor& weight, bool training,
                                     const Tensor& grad_in, const Tensor& grad_weight,
                                     const Tensor& grad_bias) {
  if (x.is_channels_blocked()) {
    return batch_norm_backward_blocked(grad_out, Tensor(), Tensor(), x, mean, invstd, weight,
                                       training, grad_in, grad_weight, grad_bias);
  }
  if (runs_channels_last(x)) {
    return batch_norm_backward_channels_last(grad_out, Tensor(), Tensor(), x, mean, invstd,
                                             weight, training, grad_in, grad_weight, grad_bias);
  }
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    const scalar_t* pg = grad_out.data<scalar_t>();
    const auto row = [&](int64_t t) { return pg + t * d.s; };
    backward<scalar_t>(d, row, row, x, mean, invstd, weight, training, grad_in, grad_weight,
                       grad_bias);
  });
}

void CpuBackend::batch_norm_relu_backward(const Tensor& grad_out, const Tensor& out,
                                          const Tensor& x, const Tensor& mean,
                                          const Tensor& invstd, const Tensor& weight,
                                          bool training, const Tensor& grad_in,
                                          const Tensor& grad_weight, const Tensor& grad_bias,
                                          const Tensor& grad_residual) {
  // Where gm goes: the residual's gradient, or else grad_in, which the gradient pass then
  // overwrites row by row in place (see the top of the file).
  const bool channels_last = runs_channels_last(x);
  const bool blocked = x.is_channels_blocked();
  const Tensor masked =
      grad_residual.defined() ? grad_residual
      : grad_in.defined()     ? grad_in
      : blocked               ? empty(x.shape(), x.options(), MemoryFormat::kChannelsBlocked)
      : channels_last         ? empty_channels_last_ncs(x)
                              : empty_like(grad_out);
  if (blocked) {
    return batch_norm_backward_blocked(grad_out, out, masked, x, mean, invstd, weight, training,
                                       grad_in, grad_weight, grad_bias);
  }
  if (channels_last) {
    return batch_norm_backward_channels_last(grad_out, out, masked, x, mean, invstd, weight,
                                             training, grad_in, grad_weight, grad_bias);
  }
  const NCS d = ncs(x);
  TS_DISPATCH_FLOATING(x.dtype(), "batch_norm_relu_backward", [&] {
    const scalar_t* pg = grad_out.data<scalar_t>();
    const scalar_t* py = out.data<scalar_t>();
    scalar_t* pm = masked.data<scalar_t>();
    const auto mask = [&](int64_t t) {
      mask_row(pg + t * d.s, py + t * d.s, pm + t * d.s, d.s);
      return static_cast<const scalar_t*>(pm + t * d.s);
    };
    const auto read = [&](int64_t t) { return static_cast<const scalar_t*>(pm + t * d.s); };
    backward<scalar_t>(d, mask, read, x, mean, invstd, weight, training, grad_in, grad_weight,
                       grad_bias);
  });
}

}  // namespace cpu
}  // namespace tessera
