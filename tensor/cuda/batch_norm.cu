// Batch norm on CUDA for x of shape [n, c, s] (s = H*W), with the CPU backend's formulas
// (tensor/cpu/batch_norm.cc): statistics in one pass of f64 sums per channel (one thread block
// per channel), the affine map y = x * scale + shift elementwise, and a backward pass that
// first reduces sum(g) and sum(g * xhat) per channel, then writes dx elementwise.
#include "tensor/cuda/block_reduce.cuh"
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"

namespace tessera {
namespace cuda {

namespace {

// Per-channel statistics type: f64 for f64 inputs, f32 otherwise.
template <typename T>
using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__global__ void stats_kernel(const T* x, stat_t<T>* mean, stat_t<T>* var, int64_t n, int64_t c,
                             int64_t s) {
  const int64_t ch = blockIdx.x, count = n * s;
  double sum = 0, sum_sq = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const double v = static_cast<double>(load(x[((k / s) * c + ch) * s + k % s]));
    sum += v;
    sum_sq += v * v;
  }
  sum = block_reduce(sum, SumOp(), 0.0);
  sum_sq = block_reduce(sum_sq, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    const double m = sum / count;
    mean[ch] = stat_t<T>(m);
    const double v = sum_sq / count - m * m;
    var[ch] = stat_t<T>(v > 0 ? v : 0.0);
  }
}

template <typename T>
__global__ void apply_kernel(const T* x, const stat_t<T>* mean, const stat_t<T>* invstd,
                             const stat_t<T>* weight, const stat_t<T>* bias, T* y, int64_t c,
                             int64_t s, int64_t total) {
  using S = stat_t<T>;
  TS_GRID_STRIDE(i, total) {
    const int64_t ch = (i / s) % c;
    const S scale = (weight ? weight[ch] : S(1)) * invstd[ch];
    const S shift = (bias ? bias[ch] : S(0)) - mean[ch] * scale;
    y[i] = store<T>(S(load(x[i])) * scale + shift);
  }
}

// workspace[ch] = sum(g), workspace[c + ch] = sum(g * xhat).
template <typename T>
__global__ void backward_reduce_kernel(const T* g, const T* x, const stat_t<T>* mean,
                                       const stat_t<T>* invstd, stat_t<T>* grad_weight,
                                       stat_t<T>* grad_bias, double* workspace, int64_t n,
                                       int64_t c, int64_t s) {
  const int64_t ch = blockIdx.x, count = n * s;
  double sg = 0, sgx = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const int64_t at = ((k / s) * c + ch) * s + k % s;
    const double gv = static_cast<double>(load(g[at]));
    sg += gv;
    sgx += gv * (static_cast<double>(load(x[at])) - mean[ch]);
  }
  sg = block_reduce(sg, SumOp(), 0.0);
  sgx = block_reduce(sgx, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    const double sgxhat = sgx * invstd[ch];
    workspace[ch] = sg;
    workspace[c + ch] = sgxhat;
    if (grad_weight) grad_weight[ch] = stat_t<T>(sgxhat);
    if (grad_bias) grad_bias[ch] = stat_t<T>(sg);
  }
}

template <typename T>
__global__ void backward_input_kernel(const T* g, const T* x, const stat_t<T>* mean,
                                      const stat_t<T>* invstd, const stat_t<T>* weight,
                                      bool training, const double* workspace, T* dx, int64_t n,
                                      int64_t c, int64_t s, int64_t total) {
  using S = stat_t<T>;
  const double count = static_cast<double>(n * s);
  TS_GRID_STRIDE(i, total) {
    const int64_t ch = (i / s) % c;
    const S k = (weight ? weight[ch] : S(1)) * invstd[ch];
    const S gv = S(load(g[i]));
    if (!training) {
      dx[i] = store<T>(gv * k);
      continue;
    }
    const S mean_g = S(workspace[ch] / count);
    const S proj = S(workspace[c + ch] / count) * invstd[ch];
    const S centered = S(load(x[i])) - mean[ch];
    dx[i] = store<T>(k * (gv - mean_g - centered * proj));
  }
}

constexpr int kChannelThreads = 512;

}  // namespace

void launch_batch_norm_stats(const void* x, void* mean, void* var, DType dtype, int64_t n,
                             int64_t c, int64_t s, cudaStream_t stream) {
  if (c == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "batch_norm_stats", [&] {
    using S = stat_t<scalar_t>;
    stats_kernel<scalar_t><<<static_cast<unsigned>(c), kChannelThreads, 0, stream>>>(
        static_cast<const scalar_t*>(x), static_cast<S*>(mean), static_cast<S*>(var), n, c, s);
  });
  check_launch("batch_norm_stats");
}

void launch_batch_norm_apply(const void* x, const void* mean, const void* invstd,
                             const void* weight, const void* bias, void* out, DType dtype,
                             int64_t n, int64_t c, int64_t s, cudaStream_t stream) {
  const int64_t total = n * c * s;
  if (total == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "batch_norm_apply", [&] {
    using S = stat_t<scalar_t>;
    apply_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const scalar_t*>(x), static_cast<const S*>(mean),
        static_cast<const S*>(invstd), static_cast<const S*>(weight),
        static_cast<const S*>(bias), static_cast<scalar_t*>(out), c, s, total);
  });
  check_launch("batch_norm_apply");
}

void launch_batch_norm_backward(const void* grad_out, const void* x, const void* mean,
                                const void* invstd, const void* weight, bool training,
                                void* grad_in, void* grad_weight, void* grad_bias,
                                double* workspace, DType dtype, int64_t n, int64_t c, int64_t s,
                                cudaStream_t stream) {
  const int64_t total = n * c * s;
  if (c == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "batch_norm_backward", [&] {
    using S = stat_t<scalar_t>;
    const scalar_t* g = static_cast<const scalar_t*>(grad_out);
    const scalar_t* xv = static_cast<const scalar_t*>(x);
    if (training || grad_weight != nullptr) {
      backward_reduce_kernel<scalar_t><<<static_cast<unsigned>(c), kChannelThreads, 0, stream>>>(
          g, xv, static_cast<const S*>(mean), static_cast<const S*>(invstd),
          static_cast<S*>(grad_weight), static_cast<S*>(grad_bias), workspace, n, c, s);
    }
    if (grad_in != nullptr && total > 0) {
      backward_input_kernel<scalar_t><<<blocks_for(total), kThreads, 0, stream>>>(
          g, xv, static_cast<const S*>(mean), static_cast<const S*>(invstd),
          static_cast<const S*>(weight), training, workspace, static_cast<scalar_t*>(grad_in),
          n, c, s, total);
    }
  });
  check_launch("batch_norm_backward");
}

}  // namespace cuda
}  // namespace tessera
