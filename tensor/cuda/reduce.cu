// Row reductions, softmax and the fused cross-entropy on CUDA: one thread block per row of a contiguous [outer, inner]
// matrix. Sums accumulate in f64 (i64 for integers), like the CPU backend; arg-reductions keep
// the first index of the extreme value, and a NaN wins, as in PyTorch.
#include <cmath>

#include "tensor/cuda/block_reduce.cuh"
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/kernels.h"

namespace tessera {
namespace cuda {

namespace {

template <typename T>
using sum_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, int64_t>;

template <typename T>
__global__ void sum_kernel(const T* x, void* out, int64_t inner, bool mean, bool integer_out) {
  const T* row = x + blockIdx.x * inner;
  sum_t<T> s = 0;
  for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) s += static_cast<sum_t<T>>(load(row[j]));
  s = block_reduce(s, SumOp(), sum_t<T>(0));
  if (threadIdx.x != 0) return;
  if (integer_out) {
    static_cast<int64_t*>(out)[blockIdx.x] = static_cast<int64_t>(s);
  } else if (mean) {
    static_cast<T*>(out)[blockIdx.x] = store<T>(static_cast<acc_t<T>>(static_cast<double>(s) / inner));
  } else {
    static_cast<T*>(out)[blockIdx.x] = store<T>(static_cast<acc_t<T>>(s));
  }
}

template <typename T>
__global__ void var_kernel(const T* x, T* out, int64_t inner, int64_t correction) {
  const T* row = x + blockIdx.x * inner;
  double s = 0;
  for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) s += static_cast<double>(load(row[j]));
  const double m = block_reduce(s, SumOp(), 0.0) / inner;
  double ss = 0;
  for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
    const double d = static_cast<double>(load(row[j])) - m;
    ss += d * d;
  }
  ss = block_reduce(ss, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    const int64_t dof = inner - correction;
    out[blockIdx.x] = store<T>(static_cast<acc_t<T>>(dof > 0 ? ss / dof : nan("")));
  }
}

// (value, index) candidates; `better` prefers NaN, then the extreme, then the lower index.
template <typename C>
struct Candidate {
  C value;
  int64_t index;
};

template <typename C>
__device__ __forceinline__ bool better(const Candidate<C>& a, const Candidate<C>& b,
                                       bool want_max) {
  if (b.index < 0) return a.index >= 0;
  if (a.index < 0) return false;
  const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
  if (a_nan || b_nan) return a_nan && (!b_nan || a.index < b.index);
  if (a.value == b.value) return a.index < b.index;
  return want_max ? a.value > b.value : a.value < b.value;
}

template <typename T>
__global__ void extreme_kernel(const T* x, void* out, int64_t inner, bool want_max,
                               bool want_index) {
  using C = acc_t<T>;
  const T* row = x + blockIdx.x * inner;
  Candidate<C> best{C(0), -1};
  for (int64_t j = threadIdx.x; j < inner; j += blockDim.x) {
    const Candidate<C> c{load(row[j]), j};
    if (better(c, best, want_max)) best = c;
  }
  __shared__ Candidate<C> slots[1024];
  slots[threadIdx.x] = best;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half && better(slots[threadIdx.x + half], slots[threadIdx.x], want_max)) {
      slots[threadIdx.x] = slots[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (want_index) {
    static_cast<int64_t*>(out)[blockIdx.x] = slots[0].index;
  } else {
    static_cast<T*>(out)[blockIdx.x] = row[slots[0].index];
  }
}

// A row's maximum m and sum of exp(x - m), computed by the whole block (every thread gets both).
template <typename T>
__device__ void row_max_and_total(const T* xr, int64_t n, acc_t<T>* max_out, double* total_out) {
  using C = acc_t<T>;
  C m = load(xr[0]);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = MaxOp()(m, load(xr[j]));
  m = block_reduce(m, MaxOp(), m);
  double total = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) total += exp(load(xr[j]) - m);
  *max_out = m;
  *total_out = block_reduce(total, SumOp(), 0.0);
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t n, bool log) {
  using C = acc_t<T>;
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  C m;
  double total;
  row_max_and_total(xr, n, &m, &total);
  if (log) {
    const C lse = m + C(::log(total));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = store<T>(load(xr[j]) - lse);
  } else {
    const C inv = C(1.0 / total);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      yr[j] = store<T>(C(exp(load(xr[j]) - m)) * inv);
    }
  }
}

template <typename T>
__global__ void softmax_backward_kernel(const T* g, const T* y, T* dx, int64_t n, bool log) {
  using C = acc_t<T>;
  const int64_t base = blockIdx.x * n;
  double dot = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    dot += log ? double(load(g[base + j])) : double(load(g[base + j])) * load(y[base + j]);
  }
  const C total = C(block_reduce(dot, SumOp(), 0.0));
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const C gj = load(g[base + j]), yj = load(y[base + j]);
    dx[base + j] = store<T>(log ? gj - C(exp(yj)) * total : yj * (gj - total));
  }
}

// One block per row: log-softmax as softmax_kernel, then the row's loss
// -(1 - eps) logp[t] - eps / n * sum(logp) (tensor/cpu/softmax.cc has the formulas).
template <typename T>
__global__ void cross_entropy_kernel(const T* x, const int64_t* target, double eps, T* logp,
                                     T* loss, int64_t n) {
  using C = acc_t<T>;
  const T* xr = x + blockIdx.x * n;
  T* lr = logp + blockIdx.x * n;
  C m;
  double total;
  row_max_and_total(xr, n, &m, &total);
  const C lse = m + C(::log(total));
  double sum_logp = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const T v = store<T>(load(xr[j]) - lse);
    lr[j] = v;
    sum_logp += double(load(v));
  }
  sum_logp = block_reduce(sum_logp, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    const double picked = double(load(store<T>(load(xr[target[blockIdx.x]]) - lse)));
    loss[blockIdx.x] = store<T>(C(-(1 - eps) * picked - eps / n * sum_logp));
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(const T* logp, const int64_t* target,
                                              const T* row_grad, double eps, T* dx,
                                              int64_t rows, int64_t n) {
  using C = acc_t<T>;
  const C off = C(eps / n), on = C(1 - eps) + off;
  TS_GRID_STRIDE(i, rows * n) {
    const int64_t r = i / n, j = i % n;
    const C q = j == target[r] ? on : off;
    dx[i] = store<T>((C(exp(load(logp[i]))) - q) * load(row_grad[r]));
  }
}

// Threads per row block: enough for the row, a multiple of 32, at most 256.
int row_threads(int64_t n) {
  int t = 32;
  while (t < 256 && t < n) t *= 2;
  return t;
}

}  // namespace

void launch_reduce(ReduceOp op, const void* in, DType in_dtype, void* out, DType out_dtype,
                   int64_t outer, int64_t inner, int64_t correction, cudaStream_t s) {
  if (outer == 0) return;
  const unsigned rows = static_cast<unsigned>(outer);
  const int threads = row_threads(inner);
  TS_CUDA_DISPATCH_ALL(in_dtype, "reduce", [&] {
    const scalar_t* x = static_cast<const scalar_t*>(in);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        sum_kernel<scalar_t><<<rows, threads, 0, s>>>(
            x, out, inner, op == ReduceOp::kMean, /*integer_out=*/out_dtype != in_dtype);
        break;
      case ReduceOp::kVar:
        var_kernel<scalar_t><<<rows, threads, 0, s>>>(x, static_cast<scalar_t*>(out), inner,
                                                      correction);
        break;
      default: {
        const bool want_max = op == ReduceOp::kMax || op == ReduceOp::kArgmax;
        const bool want_index = op == ReduceOp::kArgmax || op == ReduceOp::kArgmin;
        extreme_kernel<scalar_t><<<rows, threads, 0, s>>>(x, out, inner, want_max, want_index);
      }
    }
  });
  check_launch("reduce");
}

void launch_softmax(const void* in, void* out, DType dtype, int64_t rows, int64_t n, bool log,
                    cudaStream_t s) {
  if (rows == 0 || n == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "softmax", [&] {
    softmax_kernel<scalar_t><<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(
        static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out), n, log);
  });
  check_launch("softmax");
}

void launch_softmax_backward(const void* grad_out, const void* out, void* grad_in, DType dtype,
                             int64_t rows, int64_t n, bool log, cudaStream_t s) {
  if (rows == 0 || n == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "softmax_backward", [&] {
    softmax_backward_kernel<scalar_t><<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(
        static_cast<const scalar_t*>(grad_out), static_cast<const scalar_t*>(out),
        static_cast<scalar_t*>(grad_in), n, log);
  });
  check_launch("softmax_backward");
}

void launch_cross_entropy(const void* logits, const int64_t* target, double label_smoothing,
                          void* log_probs, void* loss, DType dtype, int64_t rows, int64_t n,
                          cudaStream_t s) {
  if (rows == 0 || n == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "cross_entropy", [&] {
    cross_entropy_kernel<scalar_t><<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(
        static_cast<const scalar_t*>(logits), target, label_smoothing,
        static_cast<scalar_t*>(log_probs), static_cast<scalar_t*>(loss), n);
  });
  check_launch("cross_entropy");
}

void launch_cross_entropy_backward(const void* log_probs, const int64_t* target,
                                   const void* row_grad, double label_smoothing,
                                   void* grad_logits, DType dtype, int64_t rows, int64_t n,
                                   cudaStream_t s) {
  if (rows == 0 || n == 0) return;
  TS_CUDA_DISPATCH_FLOATING(dtype, "cross_entropy_backward", [&] {
    cross_entropy_backward_kernel<scalar_t><<<blocks_for(rows * n), kThreads, 0, s>>>(
        static_cast<const scalar_t*>(log_probs), target,
        static_cast<const scalar_t*>(row_grad), label_smoothing,
        static_cast<scalar_t*>(grad_logits), rows, n);
  });
  check_launch("cross_entropy_backward");
}

}  // namespace cuda
}  // namespace tessera
