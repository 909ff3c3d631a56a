// CPU 2-D convolution by im2col + GEMM, a chunk of images at a time.
//
// im2col lays the input patches of Nc images out as one matrix
//     col[(c, ki, kj), (n, oh, ow)] = x[n, c, oh*s - p + ki*d, ow*s - p + kj*d]   (0 off the edge)
// so that for each group g the convolution is a single large GEMM:
//     out_g[O/g, Nc*OH*OW]  = W_g[O/g, C/g*KH*KW] . col_g
// and its two backward passes are GEMMs too:
//     dW_g += dout_g . col_g^T                 (weight gradient, summed over chunks)
//     dcol_g = W_g^T . dout_g, then col2im adds dcol back onto the input positions.
// Batching Nc images into one GEMM keeps the matrices wide enough for OpenBLAS to run near
// peak; Nc is chosen so the col buffer stays near kColBudget elements.
#include <algorithm>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kColBudget = 1 << 18;  // elements

struct Geometry {
  int64_t n, c, h, w;      // input
  int64_t o, kh, kw;       // weight [O, C/g, KH, KW]
  int64_t oh, ow;          // output plane
  int64_t groups;
  Conv2dParams p;
  int64_t col_rows() const { return c * kh * kw; }       // all groups
  int64_t plane() const { return oh * ow; }
  int64_t chunk() const {
    return std::clamp<int64_t>(kColBudget / std::max<int64_t>(col_rows() * plane(), 1), 1, n);
  }
};

Geometry geometry(const Shape& in, const Shape& weight, const Shape& out, const Conv2dParams& p) {
  return {in[0], in[1], in[2], in[3], weight[0], weight[2], weight[3], out[2], out[3],
          p.groups, p};
}

// col[(c, ki, kj), (i, oh, ow)] for images n0 .. n0+nc-1.
template <typename T>
void im2col(const T* x, const Geometry& g, int64_t n0, int64_t nc, T* col) {
  const int64_t cols = nc * g.plane();
  parallel_for(g.col_rows(), 1, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t kj = row % g.kw, ki = (row / g.kw) % g.kh, ch = row / (g.kw * g.kh);
      T* dst = col + row * cols;
      for (int64_t i = 0; i < nc; ++i) {
        const T* plane = x + ((n0 + i) * g.c + ch) * g.h * g.w;
        for (int64_t y = 0; y < g.oh; ++y) {
          const int64_t iy = y * g.p.stride[0] - g.p.padding[0] + ki * g.p.dilation[0];
          T* out_row = dst + (i * g.oh + y) * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(out_row, out_row + g.ow, T(0));
            continue;
          }
          const T* in_row = plane + iy * g.w;
          for (int64_t xo = 0; xo < g.ow; ++xo) {
            const int64_t ix = xo * g.p.stride[1] - g.p.padding[1] + kj * g.p.dilation[1];
            out_row[xo] = (ix >= 0 && ix < g.w) ? in_row[ix] : T(0);
          }
        }
      }
    }
  });
}

// grad_x[n, c, ...] += dcol[(c, ki, kj), (i, oh, ow)]; one (image, channel) plane per task, so
// no two threads write the same element.
template <typename T>
void col2im(const T* dcol, const Geometry& g, int64_t n0, int64_t nc, T* grad_x) {
  const int64_t cols = nc * g.plane();
  parallel_for(nc * g.c, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / g.c, ch = t % g.c;
      T* plane = grad_x + ((n0 + i) * g.c + ch) * g.h * g.w;
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          const T* src = dcol + ((ch * g.kh + ki) * g.kw + kj) * cols + i * g.plane();
          for (int64_t y = 0; y < g.oh; ++y) {
            const int64_t iy = y * g.p.stride[0] - g.p.padding[0] + ki * g.p.dilation[0];
            if (iy < 0 || iy >= g.h) continue;
            T* in_row = plane + iy * g.w;
            const T* s = src + y * g.ow;
            for (int64_t xo = 0; xo < g.ow; ++xo) {
              const int64_t ix = xo * g.p.stride[1] - g.p.padding[1] + kj * g.p.dilation[1];
              if (ix >= 0 && ix < g.w) in_row[ix] += s[xo];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    gemm_f32(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  } else {
    gemm_f64(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
  }
}

// [O, (i, plane)] <-> y[n0 + i, O, plane]
template <typename T>
void unpack_output(const T* tmp, const Geometry& g, int64_t n0, int64_t nc, const T* bias,
                   T* y) {
  const int64_t cols = nc * g.plane();
  parallel_for(nc * g.o, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / g.o, oc = t % g.o;
      const T* src = tmp + oc * cols + i * g.plane();
      T* dst = y + ((n0 + i) * g.o + oc) * g.plane();
      const T b = bias != nullptr ? bias[oc] : T(0);
      for (int64_t j = 0; j < g.plane(); ++j) dst[j] = src[j] + b;
    }
  });
}

template <typename T>
void pack_grad_output(const T* dy, const Geometry& g, int64_t n0, int64_t nc, T* tmp) {
  const int64_t cols = nc * g.plane();
  parallel_for(nc * g.o, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / g.o, oc = t % g.o;
      std::copy_n(dy + ((n0 + i) * g.o + oc) * g.plane(), g.plane(),
                  tmp + oc * cols + i * g.plane());
    }
  });
}

template <typename T>
void conv_forward(const T* x, const T* w, const T* bias, const Geometry& g, T* y) {
  const int64_t chunk = g.chunk();
  const int64_t rows_g = g.col_rows() / g.groups, o_g = g.o / g.groups;
  std::vector<T> col(g.col_rows() * chunk * g.plane());
  std::vector<T> tmp(g.o * chunk * g.plane());
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t nc = std::min(chunk, g.n - n0), cols = nc * g.plane();
    im2col(x, g, n0, nc, col.data());
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      gemm<T>(false, false, o_g, cols, rows_g, w + gi * o_g * rows_g, rows_g,
              col.data() + gi * rows_g * cols, cols, T(0), tmp.data() + gi * o_g * cols, cols);
    }
    unpack_output(tmp.data(), g, n0, nc, bias, y);
  }
}

template <typename T>
void conv_backward_input(const T* dy, const T* w, const Geometry& g, T* dx) {
  const int64_t chunk = g.chunk();
  const int64_t rows_g = g.col_rows() / g.groups, o_g = g.o / g.groups;
  std::vector<T> dcol(g.col_rows() * chunk * g.plane());
  std::vector<T> tmp(g.o * chunk * g.plane());
  std::fill(dx, dx + g.n * g.c * g.h * g.w, T(0));
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t nc = std::min(chunk, g.n - n0), cols = nc * g.plane();
    pack_grad_output(dy, g, n0, nc, tmp.data());
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      gemm<T>(true, false, rows_g, cols, o_g, w + gi * o_g * rows_g, rows_g,
              tmp.data() + gi * o_g * cols, cols, T(0), dcol.data() + gi * rows_g * cols, cols);
    }
    col2im(dcol.data(), g, n0, nc, dx);
  }
}

template <typename T>
void conv_backward_weight(const T* dy, const T* x, const Geometry& g, T* dw) {
  const int64_t chunk = g.chunk();
  const int64_t rows_g = g.col_rows() / g.groups, o_g = g.o / g.groups;
  std::vector<T> col(g.col_rows() * chunk * g.plane());
  std::vector<T> tmp(g.o * chunk * g.plane());
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk) {
    const int64_t nc = std::min(chunk, g.n - n0), cols = nc * g.plane();
    im2col(x, g, n0, nc, col.data());
    pack_grad_output(dy, g, n0, nc, tmp.data());
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      gemm<T>(false, true, o_g, rows_g, cols, tmp.data() + gi * o_g * cols, cols,
              col.data() + gi * rows_g * cols, cols, n0 == 0 ? T(0) : T(1),
              dw + gi * o_g * rows_g, rows_g);
    }
  }
}

// f16/bf16: run the f32 kernels on widened copies.
template <typename F>
void in_f32(const std::vector<Tensor>& inputs, const Tensor& out, F f) {
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(t.defined() ? t.to(kF32) : Tensor());
  Tensor out32 = empty(out.shape(), kF32);
  f(wide, out32);
  Tensor(out).copy_(out32);  // converts back to out's dtype
}

}  // namespace

void CpuBackend::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out) {
  const Geometry g = geometry(input.shape(), weight.shape(), out.shape(), p);
  switch (input.dtype()) {
    case kF32:
      return conv_forward<float>(input.data<float>(), weight.data<float>(),
                                 bias.defined() ? bias.data<float>() : nullptr, g,
                                 out.data<float>());
    case kF64:
      return conv_forward<double>(input.data<double>(), weight.data<double>(),
                                  bias.defined() ? bias.data<double>() : nullptr, g,
                                  out.data<double>());
    default:  // f16/bf16: the f32 kernel on widened copies
      return in_f32({input, weight, bias}, out, [&](const std::vector<Tensor>& v, const Tensor& o) {
        conv2d(v[0], v[1], v[2], p, o);
      });
  }
}

void CpuBackend::conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                                       const Conv2dParams& p, const Tensor& grad_in) {
  const Geometry g = geometry(grad_in.shape(), weight.shape(), grad_out.shape(), p);
  switch (weight.dtype()) {
    case kF32:
      return conv_backward_input<float>(grad_out.data<float>(), weight.data<float>(), g,
                                        grad_in.data<float>());
    case kF64:
      return conv_backward_input<double>(grad_out.data<double>(), weight.data<double>(), g,
                                         grad_in.data<double>());
    default:
      return in_f32({grad_out, weight}, grad_in,
                    [&](const std::vector<Tensor>& v, const Tensor& o) {
                      conv2d_backward_input(v[0], v[1], p, o);
                    });
  }
}

void CpuBackend::conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                                        const Conv2dParams& p, const Tensor& grad_weight) {
  const Geometry g = geometry(input.shape(), grad_weight.shape(), grad_out.shape(), p);
  switch (input.dtype()) {
    case kF32:
      return conv_backward_weight<float>(grad_out.data<float>(), input.data<float>(), g,
                                         grad_weight.data<float>());
    case kF64:
      return conv_backward_weight<double>(grad_out.data<double>(), input.data<double>(), g,
                                          grad_weight.data<double>());
    default:
      return in_f32({grad_out, input}, grad_weight,
                    [&](const std::vector<Tensor>& v, const Tensor& o) {
                      conv2d_backward_weight(v[0], v[1], p, o);
                    });
  }
}

}  // namespace cpu
}  // namespace tessera
