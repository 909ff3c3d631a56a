// CPU 2-D convolution by im2col + GEMM, a small group of images per task.
//
// im2col lays the input patches of G images out side by side as one matrix
//     col[(c, ki, kj), (i, oh, ow)] = x[i, c, oh*s - p + ki*d, ow*s - p + kj*d]   (0 off the edge)
// so that for each group g the convolution of those images is one GEMM:
//     y_g[O/g, G*OH*OW] = W_g[O/g, C/g*KH*KW] . col_g
// and its backward passes are GEMMs too:
//     dcol_g = W_g^T . dy_g, then col2im adds dcol back onto the input positions;
//     dW_g  += dy_g . col_g^T, summed over images.
// G is 1 for large maps and grows for small ones (7x7 has only 49 columns per image), so every
// GEMM has a few hundred columns: wide enough for the GEMM to run well, small enough that the
// col buffer stays in cache. Groups of images run in parallel on OpenMP threads; each GEMM
// inside runs on one thread (oneDNN's sgemm on CPUs with AVX-512, else OpenBLAS's, which its
// OpenMP build runs single-threaded inside a parallel region; gemm_onednn.h). A forward or
// input-gradient GEMM is cut into fixed column pieces, which run in parallel when one task
// is all there is. The weight gradient is summed per fixed block of images (or, for a lone
// task, per column piece) and the blocks are added in order. So the result does not depend on
// the number of threads.
// f16 and bf16 run the f32 kernels a task of images at a time, widened into an f32 buffer and
// rounded back (by_task_widened): the f32 path's own tasks, so its result rounded once.
#include "tensor/cpu/conv_im2col.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tensor/check.h"
#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/gemm_onednn.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

constexpr int64_t kTargetColumns = 256;  // GEMM columns per task (images x output pixels)
constexpr int64_t kGemmColumns = 1024;   // columns per piece of one product (gemm_by_columns)

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
  // Images per task: enough for ~kTargetColumns GEMM columns.
  int64_t images_per_task() const {
    return std::clamp<int64_t>((kTargetColumns + plane() - 1) / plane(), 1, n);
  }
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

// Scratch memory for one task; deliberately not zero-filled (every element is written).
template <typename T>
std::unique_ptr<T[]> scratch(int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<size_t>(n)]);
}

// dst[i] += src[i]; the two never overlap, which lets the compiler vectorize.
template <typename T>
inline void accumulate_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// col[(c, ki, kj), (i, oh, ow)] for the nc images starting at x (each [C, H, W]).
template <typename T>
void im2col(const T* x, int64_t nc, const Geometry& g, T* col) {
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1], cols = nc * g.plane();
  for (int64_t row = 0; row < g.col_rows(); ++row) {
    const int64_t kj = row % g.kw, ki = (row / g.kw) % g.kh, ch = row / (g.kw * g.kh);
    const int64_t off_x = kj * g.p.dilation[1];
    int64_t lo, hi;
    valid_range(off_x, sx, g.p.padding[1], g.w, g.ow, &lo, &hi);
    for (int64_t i = 0; i < nc; ++i) {
      const T* plane = x + (i * g.c + ch) * g.h * g.w;
      T* dst = col + row * cols + i * g.plane();
      for (int64_t y = 0; y < g.oh; ++y) {
        const int64_t iy = y * sy - g.p.padding[0] + ki * g.p.dilation[0];
        T* out_row = dst + y * g.ow;
        if (iy < 0 || iy >= g.h) {
          std::memset(out_row, 0, g.ow * sizeof(T));
          continue;
        }
        const T* in_row = plane + iy * g.w - g.p.padding[1] + off_x;  // in_row[xo*sx] = x[iy][ix]
        if (lo > 0) std::memset(out_row, 0, lo * sizeof(T));
        if (sx == 1) {
          std::memcpy(out_row + lo, in_row + lo, (hi - lo) * sizeof(T));
        } else {
          for (int64_t xo = lo; xo < hi; ++xo) out_row[xo] = in_row[xo * sx];
        }
        if (hi < g.ow) std::memset(out_row + hi, 0, (g.ow - hi) * sizeof(T));
      }
    }
  }
}

// dx[i, c, ...] += dcol[(c, ki, kj), (i, oh, ow)] for the nc images starting at dx (zeroed by
// the caller).
template <typename T>
void col2im(const T* dcol, int64_t nc, const Geometry& g, T* dx) {
  const int64_t sy = g.p.stride[0], sx = g.p.stride[1], cols = nc * g.plane();
  for (int64_t row = 0; row < g.col_rows(); ++row) {
    const int64_t kj = row % g.kw, ki = (row / g.kw) % g.kh, ch = row / (g.kw * g.kh);
    const int64_t off_x = kj * g.p.dilation[1];
    int64_t lo, hi;
    valid_range(off_x, sx, g.p.padding[1], g.w, g.ow, &lo, &hi);
    for (int64_t i = 0; i < nc; ++i) {
      T* plane = dx + (i * g.c + ch) * g.h * g.w;
      const T* src = dcol + row * cols + i * g.plane();
      for (int64_t y = 0; y < g.oh; ++y) {
        const int64_t iy = y * sy - g.p.padding[0] + ki * g.p.dilation[0];
        if (iy < 0 || iy >= g.h) continue;
        T* in_row = plane + iy * g.w - g.p.padding[1] + off_x;
        const T* s = src + y * g.ow;
        if (sx == 1) {
          accumulate_row(in_row + lo, s + lo, hi - lo);
        } else {
          for (int64_t xo = lo; xo < hi; ++xo) in_row[xo * sx] += s[xo];
        }
      }
    }
  }
}

template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_sgemm_for_conv()) {
      gemm_f32_onednn_one_thread(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    } else {
      gemm_f32(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    }
  } else {
    gemm_f64(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
  }
}

// n columns in about kGemmColumns each: pieces [piece_start(p), piece_start(p + 1)).
int64_t column_pieces(int64_t n) { return std::max<int64_t>(1, (n + kGemmColumns - 1) / kGemmColumns); }
int64_t piece_start(int64_t n, int64_t pieces, int64_t piece) { return n * piece / pieces; }

// c[m, n] = op(a)[m, k] . b[k, n] (the forward and input-gradient products, whose output
// columns are independent) in column pieces of about kGemmColumns, run on tessera's threads
// when the caller is not on one already (a single task: one image at batch 1, say). The
// pieces depend only on n, so the result does not depend on the thread count.
template <typename T>
void gemm_by_columns(bool ta, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                     const T* b, int64_t ldb, T* c, int64_t ldc) {
  const int64_t pieces = column_pieces(n);
  parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t piece = p0; piece < p1; ++piece) {
      const int64_t j0 = piece_start(n, pieces, piece), j1 = piece_start(n, pieces, piece + 1);
      gemm<T>(ta, false, m, j1 - j0, k, a, lda, b + j0, ldb, T(0), c + j0, ldc);
    }
  });
}

// [O, (i, plane)] <-> y[i, O, plane] for the nc images of one task.
template <typename T>
void unpack_rows(const T* tmp, int64_t nc, const Geometry& g, T* y) {
  for (int64_t i = 0; i < nc; ++i) {
    for (int64_t oc = 0; oc < g.o; ++oc) {
      std::memcpy(y + (i * g.o + oc) * g.plane(), tmp + oc * nc * g.plane() + i * g.plane(),
                  g.plane() * sizeof(T));
    }
  }
}

template <typename T>
void pack_rows(const T* y, int64_t nc, const Geometry& g, T* tmp) {
  for (int64_t i = 0; i < nc; ++i) {
    for (int64_t oc = 0; oc < g.o; ++oc) {
      std::memcpy(tmp + oc * nc * g.plane() + i * g.plane(), y + (i * g.o + oc) * g.plane(),
                  g.plane() * sizeof(T));
    }
  }
}

// A 1x1 convolution at stride 1 without padding: one image's input already is its patch matrix.
bool patches_are_input(const Geometry& g, int64_t images) {
  return images == 1 && g.kh == 1 && g.kw == 1 && g.p.stride[0] == 1 && g.p.stride[1] == 1 &&
         g.p.padding[0] == 0 && g.p.padding[1] == 0;
}

// The patch matrix of the images at x: x itself where patches_are_input, else im2col's copy
// in col.
template <typename T>
const T* patches(const T* x, int64_t images, const Geometry& g, T* col) {
  if (patches_are_input(g, images)) return x;
  im2col(x, images, g, col);
  return col;
}

template <typename T>
void conv_forward(const T* x, const T* w, const T* bias, const Geometry& g, T* y) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), plane = g.plane();
  const int64_t per_task = g.images_per_task(), tasks = (g.n + per_task - 1) / per_task;
  parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    const auto col = scratch<T>(patches_are_input(g, per_task) ? 0 : g.col_rows() * per_task * plane);
    const auto tmp = scratch<T>(per_task > 1 ? g.o * per_task * plane : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t first = t * per_task, nc = std::min(per_task, g.n - first), cols = nc * plane;
      const T* patch = patches(x + first * g.c * g.h * g.w, nc, g, col.get());
      // One image writes straight into y; several go through tmp and are unpacked.
      T* out = nc == 1 ? y + first * g.o * plane : tmp.get();
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        gemm_by_columns<T>(false, outs, cols, rows, w + gi * outs * rows, rows,
                           patch + gi * rows * cols, cols, out + gi * outs * cols, cols);
      }
      if (nc > 1) unpack_rows(tmp.get(), nc, g, y + first * g.o * plane);
      if (bias != nullptr) {
        for (int64_t i = first; i < first + nc; ++i) {
          for (int64_t oc = 0; oc < g.o; ++oc) {
            T* row = y + (i * g.o + oc) * plane;
            for (int64_t j = 0; j < plane; ++j) row[j] += bias[oc];
          }
        }
      }
    }
  });
}

template <typename T>
void conv_backward_input(const T* dy, const T* w, const Geometry& g, T* dx) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), plane = g.plane();
  const int64_t per_task = g.images_per_task(), tasks = (g.n + per_task - 1) / per_task;
  parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    const auto dcol = scratch<T>(patches_are_input(g, per_task) ? 0 : g.col_rows() * per_task * plane);
    const auto tmp = scratch<T>(per_task > 1 ? g.o * per_task * plane : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t first = t * per_task, nc = std::min(per_task, g.n - first), cols = nc * plane;
      const T* grad = dy + first * g.o * plane;
      if (nc > 1) {
        pack_rows(grad, nc, g, tmp.get());
        grad = tmp.get();
      }
      T* dxi = dx + first * g.c * g.h * g.w;
      // Where the input is its own patch matrix, so is its gradient: the product writes dx.
      const bool direct = patches_are_input(g, nc);
      T* out = direct ? dxi : dcol.get();
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        gemm_by_columns<T>(true, rows, cols, outs, w + gi * outs * rows, rows,
                           grad + gi * outs * cols, cols, out + gi * rows * cols, cols);
      }
      if (direct) continue;
      std::memset(dxi, 0, nc * g.c * g.h * g.w * sizeof(T));
      col2im(dcol.get(), nc, g, dxi);
    }
  });
}

// The weight gradient when all the images make one task (batch 1, or a few small maps): its
// columns are cut into fixed pieces, each with its own partial gradient, so that the threads
// share the product; the partials are added in order.
template <typename T>
void conv_backward_weight_one_task(const T* dy, const T* x, const Geometry& g, T* dw) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), cols = g.n * g.plane();
  const int64_t weight_size = g.o * rows, pieces = column_pieces(cols);
  const auto col = scratch<T>(patches_are_input(g, g.n) ? 0 : g.col_rows() * cols);
  const auto tmp = scratch<T>(g.n > 1 ? g.o * cols : 0);
  const T* patch = patches(x, g.n, g, col.get());
  const T* grad = dy;
  if (g.n > 1) {
    pack_rows(dy, g.n, g, tmp.get());
    grad = tmp.get();
  }
  const auto partial = scratch<T>(pieces * weight_size);
  parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t piece = p0; piece < p1; ++piece) {
      const int64_t j0 = piece_start(cols, pieces, piece);
      const int64_t columns = piece_start(cols, pieces, piece + 1) - j0;
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        gemm<T>(false, true, outs, rows, columns, grad + gi * outs * cols + j0, cols,
                patch + gi * rows * cols + j0, cols, T(0),
                partial.get() + piece * weight_size + gi * outs * rows, rows);
      }
    }
  });
  std::memcpy(dw, partial.get(), weight_size * sizeof(T));
  for (int64_t p = 1; p < pieces; ++p) accumulate_row(dw, partial.get() + p * weight_size, weight_size);
}

// One task's weight gradient (nc images at dy and x) into `partial`, with scratch col and tmp.
template <typename T>
void weight_task(const T* dy, const T* x, int64_t nc, const Geometry& g, T* col, T* tmp,
                 T* partial) {
  const int64_t rows = g.rows_per_group(), outs = g.out_per_group(), cols = nc * g.plane();
  const T* patch = patches(x, nc, g, col);
  const T* grad = dy;
  if (nc > 1) {
    pack_rows(grad, nc, g, tmp);
    grad = tmp;
  }
  for (int64_t gi = 0; gi < g.groups; ++gi) {
    gemm<T>(false, true, outs, rows, cols, grad + gi * outs * cols, cols, patch + gi * rows * cols,
            cols, T(0), partial + gi * outs * rows, rows);
  }
}

template <typename T>
void conv_backward_weight(const T* dy, const T* x, const Geometry& g, T* dw) {
  const int64_t rows = g.rows_per_group(), plane = g.plane();
  const int64_t weight_size = g.o * rows;
  // Fixed blocks of images (independent of the thread count) each get a partial gradient.
  const int64_t per_task = g.images_per_task(), tasks = (g.n + per_task - 1) / per_task;
  if (tasks == 1) return conv_backward_weight_one_task(dy, x, g, dw);
  const auto partial = scratch<T>(tasks * weight_size);
  parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    const auto col = scratch<T>(patches_are_input(g, per_task) ? 0 : g.col_rows() * per_task * plane);
    const auto tmp = scratch<T>(per_task > 1 ? g.o * per_task * plane : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t first = t * per_task, nc = std::min(per_task, g.n - first);
      weight_task(dy + first * g.o * plane, x + first * g.c * g.h * g.w, nc, g, col.get(),
                  tmp.get(), partial.get() + t * weight_size);
    }
  });
  // Blocks are added in a fixed order: the sum is the same for any thread count.
  std::memcpy(dw, partial.get(), weight_size * sizeof(T));
  for (int64_t t = 1; t < tasks; ++t) accumulate_row(dw, partial.get() + t * weight_size, weight_size);
}

// f16/bf16 passes on the im2col path, a task of images at a time: `in` (in_image values per
// image) widened into an f32 buffer, run(task geometry, widened in, f32 result) for that task
// of the f32 pass (the same images per task, so the same products and bits), and the result
// (out_image values per image) rounded into `out`: no widened copy of a whole tensor.
template <typename S, typename Run>
void by_task_widened(const S* in, int64_t in_image, S* out, int64_t out_image, const Geometry& g,
                     Run run) {
  const int64_t per_task = g.images_per_task(), tasks = (g.n + per_task - 1) / per_task;
  parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    const auto wide_in = scratch<float>(per_task * in_image);
    const auto wide_out = scratch<float>(per_task * out_image);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t first = t * per_task, nc = std::min(per_task, g.n - first);
      widen(in + first * in_image, wide_in.get(), nc * in_image);
      Geometry task = g;
      task.n = nc;
      run(task, wide_in.get(), wide_out.get());
      narrow(wide_out.get(), out + first * out_image, nc * out_image);
    }
  });
}

template <typename S>
void conv_forward_half(const S* x, const float* w, const float* bias, const Geometry& g, S* y) {
  by_task_widened(x, g.c * g.h * g.w, y, g.o * g.plane(), g,
                  [&](const Geometry& task, const float* xt, float* yt) {
                    conv_forward<float>(xt, w, bias, task, yt);
                  });
}

template <typename S>
void conv_backward_input_half(const S* dy, const float* w, const Geometry& g, S* dx) {
  by_task_widened(dy, g.o * g.plane(), dx, g.c * g.h * g.w, g,
                  [&](const Geometry& task, const float* dyt, float* dxt) {
                    conv_backward_input<float>(dyt, w, task, dxt);
                  });
}

// The weight gradient likewise: each task widens its images' output gradient and input, and
// adds the f32 kernel's partial for them; the partials are added in order, into f32 dw. (A
// lone task is the whole batch: conv_backward_weight on it widened.)
template <typename S>
void conv_backward_weight_half(const S* dy, const S* x, const Geometry& g, float* dw) {
  const int64_t per_task = g.images_per_task(), tasks = (g.n + per_task - 1) / per_task;
  const int64_t in_image = g.c * g.h * g.w, out_image = g.o * g.plane();
  const int64_t weight_size = g.o * g.rows_per_group(), plane = g.plane();
  const auto partial = scratch<float>(tasks * weight_size);
  parallel_for(tasks, 1, [&](int64_t t0, int64_t t1) {
    const auto grad = scratch<float>(per_task * out_image);
    const auto in = scratch<float>(per_task * in_image);
    const auto col = scratch<float>(patches_are_input(g, per_task) ? 0 : g.col_rows() * per_task * plane);
    const auto tmp = scratch<float>(per_task > 1 ? g.o * per_task * plane : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t first = t * per_task, nc = std::min(per_task, g.n - first);
      widen(dy + first * out_image, grad.get(), nc * out_image);
      widen(x + first * in_image, in.get(), nc * in_image);
      if (tasks == 1) return conv_backward_weight<float>(grad.get(), in.get(), g, dw);
      weight_task<float>(grad.get(), in.get(), nc, g, col.get(), tmp.get(),
                         partial.get() + t * weight_size);
    }
  });
  if (tasks == 1) return;
  std::memcpy(dw, partial.get(), weight_size * sizeof(float));
  for (int64_t t = 1; t < tasks; ++t) accumulate_row(dw, partial.get() + t * weight_size, weight_size);
}

// f16/bf16 tensors through the *_half kernels above (weights and bias widened: they are small).
template <typename S>
void forward_half(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Geometry& g, const Tensor& out) {
  const Tensor w32 = weight.to(kF32), b32 = bias.defined() ? bias.to(kF32) : Tensor();
  conv_forward_half(input.data<S>(), w32.data<float>(),
                    b32.defined() ? b32.data<float>() : nullptr, g, out.data<S>());
}

template <typename S>
void backward_input_half(const Tensor& grad_out, const Tensor& weight, const Geometry& g,
                         const Tensor& grad_in) {
  const Tensor w32 = weight.to(kF32);
  conv_backward_input_half(grad_out.data<S>(), w32.data<float>(), g, grad_in.data<S>());
}

template <typename S>
void backward_weight_half(const Tensor& grad_out, const Tensor& input, const Geometry& g,
                          const Tensor& grad_weight) {
  const Tensor dw = empty(grad_weight.shape(), kF32);
  conv_backward_weight_half(grad_out.data<S>(), input.data<S>(), g, dw.data<float>());
  Tensor(grad_weight).copy_(dw);
}

}  // namespace

void im2col_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& p, const Tensor& out) {
  const Geometry g = geometry(input.shape(), weight.shape(), out.shape(), p);
  const auto b = [&](auto type) {
    using T = decltype(type);
    return bias.defined() ? bias.data<T>() : nullptr;
  };
  switch (input.dtype()) {
    case kF32:
      return conv_forward<float>(input.data<float>(), weight.data<float>(), b(float()), g,
                                 out.data<float>());
    case kF64:
      return conv_forward<double>(input.data<double>(), weight.data<double>(), b(double()), g,
                                  out.data<double>());
    case kF16: return forward_half<Half>(input, weight, bias, g, out);
    case kBF16: return forward_half<BFloat16>(input, weight, bias, g, out);
    default: TS_INTERNAL_ASSERT(false, "im2col_conv2d: got ", input.dtype());
  }
}

void im2col_conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                                  const Conv2dParams& p, const Tensor& grad_in) {
  const Geometry g = geometry(grad_in.shape(), weight.shape(), grad_out.shape(), p);
  switch (weight.dtype()) {
    case kF32:
      return conv_backward_input<float>(grad_out.data<float>(), weight.data<float>(), g,
                                        grad_in.data<float>());
    case kF64:
      return conv_backward_input<double>(grad_out.data<double>(), weight.data<double>(), g,
                                         grad_in.data<double>());
    case kF16: return backward_input_half<Half>(grad_out, weight, g, grad_in);
    case kBF16: return backward_input_half<BFloat16>(grad_out, weight, g, grad_in);
    default: TS_INTERNAL_ASSERT(false, "im2col_conv2d_backward_input: got ", weight.dtype());
  }
}

void im2col_conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                                   const Conv2dParams& p, const Tensor& grad_weight) {
  const Geometry g = geometry(input.shape(), grad_weight.shape(), grad_out.shape(), p);
  switch (input.dtype()) {
    case kF32:
      return conv_backward_weight<float>(grad_out.data<float>(), input.data<float>(), g,
                                         grad_weight.data<float>());
    case kF64:
      return conv_backward_weight<double>(grad_out.data<double>(), input.data<double>(), g,
                                          grad_weight.data<double>());
    case kF16: return backward_weight_half<Half>(grad_out, input, g, grad_weight);
    case kBF16: return backward_weight_half<BFloat16>(grad_out, input, g, grad_weight);
    default: TS_INTERNAL_ASSERT(false, "im2col_conv2d_backward_weight: got ", input.dtype());
  }
}

}  // namespace cpu
}  // namespace tessera
