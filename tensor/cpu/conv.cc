// CPU 2-D convolution by im2col + GEMM, one image per task.
//
// im2col lays the input patches of one image out as a matrix
//     col[(c, ki, kj), (oh, ow)] = x[c, oh*s - p + ki*d, ow*s - p + kj*d]   (0 off the edge)
// so that for each group g the convolution of that image is one GEMM straight into the output:
//     y_g[O/g, OH*OW] = W_g[O/g, C/g*KH*KW] . col_g
// and its backward passes are GEMMs too:
//     dcol_g = W_g^T . dy_g, then col2im adds dcol back onto the input positions;
//     dW_g  += dy_g . col_g^T, summed over images.
// Images run in parallel on OpenMP threads, each with its own col buffer (a few hundred KiB for
// ResNet-20's layers, so it stays in cache); the GEMMs inside run single-threaded (OpenBLAS's
// OpenMP build does so inside a parallel region). The weight gradient is summed per fixed block
// of images and the blocks are added in order, so the result does not depend on the number of
// threads.
#include <algorithm>
#include <vector>

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kWeightGradBlock = 4;  // images per partial weight gradient

struct Geometry {
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // weight [O, C/g, KH, KW]
  int64_t oh, ow;      // output plane
  int64_t groups;
  Conv2dParams p;
  int64_t col_rows() const { return c * kh * kw; }  // all groups
  int64_t plane() const { return oh * ow; }
  int64_t rows_per_group() const { return col_rows() / groups; }
  int64_t out_per_group() const { return o / groups; }
};

Geometry geometry(const Shape& in, const Shape& weight, const Shape& out, const Conv2dParams& p) {
  return {in[0], in[1], in[2], in[3], weight[0], weight[2], weight[3], out[2], out[3],
          p.groups, p};
}

// The output columns [lo, hi) whose input column ix = xo*stride - pad + offset is in [0, w).
inline void valid_range(int64_t offset, int64_t stride, int64_t pad, int64_t w, int64_t ow,
                        int64_t* lo, int64_t* hi) {
  const int64_t first = pad - offset;  // ix >= 0  <=>  xo*stride >= pad - offset
  *lo = first <= 0 ? 0 : std::min(ow, (first + stride - 1) / stride);
  const int64_t last = w - 1 + pad - offset;  // ix <= w-1
  *hi = last < 0 ? 0 : std::min(ow, last / stride + 1);
  if (*hi < *lo) *hi = *lo;
}

// col[(c, ki, kj), (oh, ow)] for one image x [C, H, W].
template <typename T>
void im2col(const T* x, const Geometry& g, T* col) {
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1];
  for (int64_t row = 0; row < g.col_rows(); ++row) {
    const int64_t kj = row % g.kw, ki = (row / g.kw) % g.kh, ch = row / (g.kw * g.kh);
    const T* plane = x + ch * g.h * g.w;
    const int64_t off_x = kj * g.p.dilation[1];
    int64_t lo, hi;
    valid_range(off_x, sx, g.p.padding[1], g.w, g.ow, &lo, &hi);
    T* dst = col + row * g.plane();
    for (int64_t y = 0; y < g.oh; ++y) {
      const int64_t iy = y * sy - g.p.padding[0] + ki * g.p.dilation[0];
      T* out_row = dst + y * g.ow;
      if (iy < 0 || iy >= g.h) {
        std::fill(out_row, out_row + g.ow, T(0));
        continue;
      }
      const T* in_row = plane + iy * g.w - g.p.padding[1] + off_x;  // in_row[xo*sx] = x[iy][ix]
      std::fill(out_row, out_row + lo, T(0));
      if (sx == 1) {
        std::copy(in_row + lo, in_row + hi, out_row + lo);
      } else {
        for (int64_t xo = lo; xo < hi; ++xo) out_row[xo] = in_row[xo * sx];
      }
      std::fill(out_row + hi, out_row + g.ow, T(0));
    }
  }
}

// dx[c, ...] += dcol[(c, ki, kj), (oh, ow)] for one image (dx zeroed by the caller).
template <typename T>
void col2im(const T* dcol, const Geometry& g, T* dx) {
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1];
  for (int64_t row = 0; row < g.col_rows(); ++row) {
    const int64_t kj = row % g.kw, ki = (row / g.kw) % g.kh, ch = row / (g.kw * g.kh);
    T* plane = dx + ch * g.h * g.w;
    const int64_t off_x = kj * g.p.dilation[1];
    int64_t lo, hi;
    valid_range(off_x, sx, g.p.padding[1], g.w, g.ow, &lo, &hi);
    const T* src = dcol + row * g.plane();
    for (int64_t y = 0; y < g.oh; ++y) {
      const int64_t iy = y * sy - g.p.padding[0] + ki * g.p.dilation[0];
      if (iy < 0 || iy >= g.h) continue;
      T* in_row = plane + iy * g.w - g.p.padding[1] + off_x;
      const T* s = src + y * g.ow;
      if (sx == 1) {
        for (int64_t xo = lo; xo < hi; ++xo) in_row[xo] += s[xo];
      } else {
        for (int64_t xo = lo; xo < hi; ++xo) in_row[xo * sx] += s[xo];
      }
    }
  }
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

template <typename T>
void conv_forward(const T* x, const T* w, const T* bias, const Geometry& g, T* y) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), plane = g.plane();
  parallel_for(g.n, 1, [&](int64_t n0, int64_t n1) {
    std::vector<T> col(g.col_rows() * plane);
    for (int64_t i = n0; i < n1; ++i) {
      im2col(x + i * g.c * g.h * g.w, g, col.data());
      T* yi = y + i * g.o * plane;
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        gemm<T>(false, false, outs, plane, rows, w + gi * outs * rows, rows,
                col.data() + gi * rows * plane, plane, T(0), yi + gi * outs * plane, plane);
      }
      if (bias != nullptr) {
        for (int64_t oc = 0; oc < g.o; ++oc) {
          T* row = yi + oc * plane;
          for (int64_t j = 0; j < plane; ++j) row[j] += bias[oc];
        }
      }
    }
  });
}

template <typename T>
void conv_backward_input(const T* dy, const T* w, const Geometry& g, T* dx) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), plane = g.plane();
  parallel_for(g.n, 1, [&](int64_t n0, int64_t n1) {
    std::vector<T> dcol(g.col_rows() * plane);
    for (int64_t i = n0; i < n1; ++i) {
      const T* dyi = dy + i * g.o * plane;
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        gemm<T>(true, false, rows, plane, outs, w + gi * outs * rows, rows,
                dyi + gi * outs * plane, plane, T(0), dcol.data() + gi * rows * plane, plane);
      }
      T* dxi = dx + i * g.c * g.h * g.w;
      std::fill(dxi, dxi + g.c * g.h * g.w, T(0));
      col2im(dcol.data(), g, dxi);
    }
  });
}

template <typename T>
void conv_backward_weight(const T* dy, const T* x, const Geometry& g, T* dw) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), plane = g.plane();
  const int64_t weight_size = g.o * rows;
  const int64_t blocks = (g.n + kWeightGradBlock - 1) / kWeightGradBlock;
  std::vector<T> partial(blocks * weight_size);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> col(g.col_rows() * plane);
    for (int64_t b = b0; b < b1; ++b) {
      T* dwb = partial.data() + b * weight_size;
      const int64_t first = b * kWeightGradBlock, last = std::min(g.n, first + kWeightGradBlock);
      for (int64_t i = first; i < last; ++i) {
        im2col(x + i * g.c * g.h * g.w, g, col.data());
        const T* dyi = dy + i * g.o * plane;
        for (int64_t gi = 0; gi < g.groups; ++gi) {
          gemm<T>(false, true, outs, rows, plane, dyi + gi * outs * plane, plane,
                  col.data() + gi * rows * plane, plane, i == first ? T(0) : T(1),
                  dwb + gi * outs * rows, rows);
        }
      }
    }
  });
  // Blocks are added in a fixed order: the sum is the same for any thread count.
  std::copy(partial.begin(), partial.begin() + weight_size, dw);
  for (int64_t b = 1; b < blocks; ++b) {
    const T* src = partial.data() + b * weight_size;
    for (int64_t k = 0; k < weight_size; ++k) dw[k] += src[k];
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
