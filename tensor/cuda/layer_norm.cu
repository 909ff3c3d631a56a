// Layer norm on CUDA over the rows of x [rows, n], with the CPU kernel's formulas
// (tensor/cpu/layer_norm.cc explains them): one thread block per row for the forward and for
// the input's gradient (the row's sums are block reductions), and a column-wise pass for the
// parameters' gradients, which are sums over the rows.
//
// dweight and dbias without atomics, so that they are the same bits on every run: the rows are
// cut into chunks (of kRowsPerChunk rows, more when that would exceed the grid); a thread per (chunk, column) adds that chunk's rows with +=
// into its own slot of a workspace [chunks, 2, n] (every row used the same weight, so its
// gradient is the sum of the rows' contributions), and a last kernel adds the chunks' slots in
// chunk order. Neighbouring threads take neighbouring columns, so every read is coalesced.
#include "tensor/cuda/block_reduce.cuh"
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/transformer_kernels.h"

namespace tessera {
namespace cuda {

namespace {

constexpr int kRowThreads = 128;     // one block per row
constexpr int kColumnThreads = 256;  // the parameter-gradient passes
constexpr int64_t kRowsPerChunk = 64;
constexpr int64_t kMaxChunks = 65535;  // the grid's y dimension

template <typename T>
__global__ void forward_kernel(const T* x, const acc_t<T>* weight, const acc_t<T>* bias,
                               double eps, T* y, acc_t<T>* mean, acc_t<T>* rstd, int64_t n) {
  using C = acc_t<T>;
  const int64_t row = blockIdx.x;
  const T* xr = x + row * n;
  C sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += load(xr[j]);
  const C m = block_reduce(sum, SumOp(), C(0)) / C(n);
  // Two passes, as on the CPU: the second reads the row again from L1/L2.
  C sum_sq = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C d = load(xr[j]) - m;
    sum_sq += d * d;
  }
  const C var = block_reduce(sum_sq, SumOp(), C(0)) / C(n);
  const C rs = C(1) / sqrt(var + C(eps));
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    y[row * n + j] = store<T>((load(xr[j]) - m) * rs * weight[j] + bias[j]);
  }
  if (threadIdx.x == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = g * weight.
template <typename T>
__global__ void input_grad_kernel(const T* g, const T* x, const acc_t<T>* mean,
                                  const acc_t<T>* rstd, const acc_t<T>* weight, T* dx,
                                  int64_t n) {
  using C = acc_t<T>;
  const int64_t row = blockIdx.x;
  const T* gr = g + row * n;
  const T* xr = x + row * n;
  const C m = mean[row], rs = rstd[row];
  C s1 = 0, s2 = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C dxhat = load(gr[j]) * weight[j];
    s1 += dxhat;
    s2 += dxhat * (load(xr[j]) - m) * rs;
  }
  const C mean_dxhat = block_reduce(s1, SumOp(), C(0)) / C(n);
  const C mean_dxhat_xhat = block_reduce(s2, SumOp(), C(0)) / C(n);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C xhat = (load(xr[j]) - m) * rs;
    dx[row * n + j] =
        store<T>(rs * (load(gr[j]) * weight[j] - mean_dxhat - xhat * mean_dxhat_xhat));
  }
}

// workspace[chunk][0][j] = sum of g * xhat, workspace[chunk][1][j] = sum of g, over the rows
// of the chunk (blockIdx.y).
template <typename T>
__global__ void param_chunk_kernel(const T* g, const T* x, const acc_t<T>* mean,
                                   const acc_t<T>* rstd, acc_t<T>* workspace, int64_t rows,
                                   int64_t n, int64_t per_chunk) {
  using C = acc_t<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const int64_t chunk = blockIdx.y, r0 = chunk * per_chunk;
  const int64_t r1 = r0 + per_chunk < rows ? r0 + per_chunk : rows;
  C dweight = 0, dbias = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const C gv = load(g[r * n + j]);
    dweight += gv * (load(x[r * n + j]) - mean[r]) * rstd[r];
    dbias += gv;
  }
  workspace[(chunk * 2) * n + j] = dweight;
  workspace[(chunk * 2 + 1) * n + j] = dbias;
}

template <typename C>
__global__ void param_sum_kernel(const C* workspace, C* grad_weight, C* grad_bias,
                                 int64_t chunks, int64_t n) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  C dweight = 0, dbias = 0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    dweight += workspace[(chunk * 2) * n + j];
    dbias += workspace[(chunk * 2 + 1) * n + j];
  }
  if (grad_weight != nullptr) grad_weight[j] = dweight;
  if (grad_bias != nullptr) grad_bias[j] = dbias;
}

int64_t rows_per_chunk(int64_t rows) {
  const int64_t at_most = (rows + kMaxChunks - 1) / kMaxChunks;
  return at_most > kRowsPerChunk ? at_most : kRowsPerChunk;
}

int64_t chunks_of(int64_t rows) {
  const int64_t per_chunk = rows_per_chunk(rows);
  return (rows + per_chunk - 1) / per_chunk;
}

unsigned column_blocks(int64_t n) {
  return static_cast<unsigned>((n + kColumnThreads - 1) / kColumnThreads);
}

}  // namespace

void launch_layer_norm(const void* x, const void* weight, const void* bias, double eps, void* out,
                       void* mean, void* rstd, DType dtype, int64_t rows, int64_t n,
                       cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "layer_norm", [&] {
    using C = acc_t<scalar_t>;
    forward_kernel<scalar_t><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        static_cast<const scalar_t*>(x), static_cast<const C*>(weight),
        static_cast<const C*>(bias), eps, static_cast<scalar_t*>(out), static_cast<C*>(mean),
        static_cast<C*>(rstd), n);
  });
  check_launch("layer_norm");
}

int64_t layer_norm_workspace_size(int64_t rows, int64_t n) { return chunks_of(rows) * 2 * n; }

void launch_layer_norm_backward(const void* grad_out, const void* x, const void* mean,
                                const void* rstd, const void* weight, void* grad_in,
                                void* grad_weight, void* grad_bias, void* workspace, DType dtype,
                                int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "layer_norm_backward", [&] {
    using C = acc_t<scalar_t>;
    const scalar_t* g = static_cast<const scalar_t*>(grad_out);
    const scalar_t* xv = static_cast<const scalar_t*>(x);
    const C* m = static_cast<const C*>(mean);
    const C* rs = static_cast<const C*>(rstd);
    if (grad_in != nullptr) {
      input_grad_kernel<scalar_t><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
          g, xv, m, rs, static_cast<const C*>(weight), static_cast<scalar_t*>(grad_in), n);
    }
    if (grad_weight != nullptr || grad_bias != nullptr) {
      const int64_t chunks = chunks_of(rows);
      C* ws = static_cast<C*>(workspace);
      param_chunk_kernel<scalar_t>
          <<<dim3(column_blocks(n), static_cast<unsigned>(chunks)), kColumnThreads, 0, stream>>>(
              g, xv, m, rs, ws, rows, n, rows_per_chunk(rows));
      param_sum_kernel<C><<<column_blocks(n), kColumnThreads, 0, stream>>>(
          ws, static_cast<C*>(grad_weight), static_cast<C*>(grad_bias), chunks, n);
    }
  });
  check_launch("layer_norm_backward");
}

}  // namespace cuda
}  // namespace tessera
