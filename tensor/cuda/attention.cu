// Causal attention on CUDA: a straightforward blocked version of FlashAttention's algorithm
// (tensor/cpu/attention.cc explains it), one thread per query (or key) row and tiles of rows
// staged in shared memory. Like the CPU kernels it never stores the T x T scores: forward
// keeps O and the row logsumexp L, backward recomputes P = exp(s q.k - L) wherever it needs it.
//
//   forward     grid (query tiles, B H): each thread keeps its query's running max m, sum l
//               and unnormalized output o (in shared memory, [D][tile], so that the threads of
//               a warp touch consecutive words) while the tiles of K and V up to the diagonal
//               pass through shared memory.
//   delta       D_r = sum_d dO[r][d] O[r][d], one thread per row.
//   dK, dV      grid (key tiles, B H): each thread owns one key row and sums its dK and dV over
//               the query tiles from the diagonal on (Q, dO, L and D staged per tile).
//   dQ          grid (query tiles, B H): each thread owns one query row and sums its dQ over
//               the key tiles up to the diagonal.
// Every gradient row is summed by one thread in a fixed order: no atomics, and the results do
// not depend on scheduling. f32 and f64 (the op widens f16/bf16 to f32 before it gets here).
#include <cmath>
#include <stdexcept>
#include <string>

#include "tensor/cuda/attention.h"
#include "tensor/cuda/cuda_check_launch.h"
#include "tensor/cuda/device_types.cuh"

namespace tessera {
namespace cuda {

namespace {

// At most this many rows per tile (threads per block), so that a row's scores of one tile fit
// in a small per-thread array.
constexpr int kMaxTile = 32;
// Shared memory a block may use without opting in to more.
constexpr int64_t kSharedBytes = 48 * 1024;

// The rows per tile when each row needs `per_row` elements of T in shared memory.
template <typename T>
int tile_rows(int64_t per_row, const char* kernel) {
  const int64_t rows = kSharedBytes / (per_row * static_cast<int64_t>(sizeof(T)));
  if (rows < 1) {
    throw std::invalid_argument(std::string(kernel) + ": head dimension too large for the " +
                                "CUDA attention kernel's shared memory (" +
                                std::to_string(per_row) + " elements per row)");
  }
  return static_cast<int>(rows < kMaxTile ? rows : kMaxTile);
}

// Loads rows [row0, row0 + n) of a [t, d] matrix into smem [n][d], all threads of the block.
template <typename T>
__device__ void stage_rows(const T* src, int64_t row0, int n, int64_t d, T* dst) {
  for (int64_t i = threadIdx.x; i < n * d; i += blockDim.x) dst[i] = src[row0 * d + i];
}

// This thread's row `row` of a [t, d] matrix (zeros past t) into column `lane` of smem
// [d][tile], where the threads of a warp write consecutive words.
template <typename T>
__device__ void own_row(const T* src, int64_t row, int64_t t, int64_t d, int tile, T* dst) {
  for (int64_t dd = 0; dd < d; ++dd) {
    dst[dd * tile + threadIdx.x] = row < t ? src[row * d + dd] : T(0);
  }
}

template <typename T>
__device__ void zero_column(int64_t d, int tile, T* dst) {
  for (int64_t dd = 0; dd < d; ++dd) dst[dd * tile + threadIdx.x] = 0;
}

template <typename T>
__global__ void forward_kernel(const T* q, const T* k, const T* v, T* out, T* lse, int64_t t,
                               int64_t d, T scale, int tile) {
  extern __shared__ unsigned char shared_bytes[];
  T* qs = reinterpret_cast<T*>(shared_bytes);  // [d][tile]: this block's queries
  T* acc = qs + d * tile;                       // [d][tile]: their unnormalized outputs
  T* ks = acc + d * tile;                       // [tile][d]: a tile of keys
  T* vs = ks + tile * d;                        // [tile][d]: and of values
  const int64_t base = static_cast<int64_t>(blockIdx.y) * t * d;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int lane = threadIdx.x;
  const int64_t row = r0 + lane;
  const bool active = row < t;
  own_row(q + base, row, t, d, tile, qs);
  zero_column(d, tile, acc);
  T m = -INFINITY, l = 0;
  T s[kMaxTile];
  const int64_t keys = r0 + tile < t ? r0 + tile : t;  // keys after the last query are hidden
  for (int64_t c0 = 0; c0 < keys; c0 += tile) {
    const int nc = static_cast<int>(keys - c0 < tile ? keys - c0 : tile);
    __syncthreads();  // the previous tile is consumed
    stage_rows(k + base, c0, nc, d, ks);
    stage_rows(v + base, c0, nc, d, vs);
    __syncthreads();
    if (!active || c0 > row) continue;
    const int visible = static_cast<int>(row - c0 + 1 < nc ? row - c0 + 1 : nc);
    T tile_max = -INFINITY;
    for (int c = 0; c < visible; ++c) {
      T dot = 0;
      for (int64_t dd = 0; dd < d; ++dd) dot += qs[dd * tile + lane] * ks[c * d + dd];
      s[c] = dot * scale;
      tile_max = s[c] > tile_max ? s[c] : tile_max;
    }
    const T m_new = m > tile_max ? m : tile_max;
    const T rescale = exp(m - m_new);  // 0 for the first tile's m = -inf
    l *= rescale;
    for (int c = 0; c < visible; ++c) {
      s[c] = exp(s[c] - m_new);
      l += s[c];
    }
    for (int64_t dd = 0; dd < d; ++dd) {
      T o = acc[dd * tile + lane] * rescale;
      for (int c = 0; c < visible; ++c) o += s[c] * vs[c * d + dd];
      acc[dd * tile + lane] = o;
    }
    m = m_new;
  }
  if (!active) return;
  for (int64_t dd = 0; dd < d; ++dd) out[base + row * d + dd] = acc[dd * tile + lane] / l;
  lse[static_cast<int64_t>(blockIdx.y) * t + row] = m + log(l);
}

template <typename T>
__global__ void delta_kernel(const T* grad_out, const T* out, T* delta, int64_t rows,
                             int64_t d) {
  TS_GRID_STRIDE(r, rows) {
    T sum = 0;
    for (int64_t dd = 0; dd < d; ++dd) sum += grad_out[r * d + dd] * out[r * d + dd];
    delta[r] = sum;
  }
}

template <typename T>
__global__ void grad_kv_kernel(const T* q, const T* k, const T* v, const T* grad_out,
                               const T* lse, const T* delta, T* grad_k, T* grad_v, int64_t t,
                               int64_t d, T scale, int tile) {
  extern __shared__ unsigned char shared_bytes[];
  T* kk = reinterpret_cast<T*>(shared_bytes);  // [d][tile]: this block's keys
  T* vv = kk + d * tile;                        // [d][tile]: and values
  T* dk = vv + d * tile;                        // [d][tile]: their gradients
  T* dv = dk + d * tile;
  T* qs = dv + d * tile;                        // [tile][d]: a tile of queries
  T* gs = qs + tile * d;                        // [tile][d]: and of dO
  T* ls = gs + tile * d;                        // [tile]:    their L
  T* ds = ls + tile;                            // [tile]:    and D
  const int64_t head = blockIdx.y, base = head * t * d;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int lane = threadIdx.x;
  const int64_t col = c0 + lane;  // this thread's key
  const bool active = col < t;
  own_row(k + base, col, t, d, tile, kk);
  own_row(v + base, col, t, d, tile, vv);
  zero_column(d, tile, dk);
  zero_column(d, tile, dv);
  // Queries before c0 see none of this block's keys.
  for (int64_t r0 = c0; r0 < t; r0 += tile) {
    const int nr = static_cast<int>(t - r0 < tile ? t - r0 : tile);
    __syncthreads();
    stage_rows(q + base, r0, nr, d, qs);
    stage_rows(grad_out + base, r0, nr, d, gs);
    for (int i = threadIdx.x; i < nr; i += blockDim.x) {
      ls[i] = lse[head * t + r0 + i];
      ds[i] = delta[head * t + r0 + i];
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < nr; ++r) {
      if (r0 + r < col) continue;  // query r0 + r does not see this key
      T dot = 0, dp = 0;
      for (int64_t dd = 0; dd < d; ++dd) {
        dot += qs[r * d + dd] * kk[dd * tile + lane];
        dp += gs[r * d + dd] * vv[dd * tile + lane];
      }
      const T p = exp(dot * scale - ls[r]);
      const T dscore = p * (dp - ds[r]) * scale;
      for (int64_t dd = 0; dd < d; ++dd) {
        dv[dd * tile + lane] += p * gs[r * d + dd];
        dk[dd * tile + lane] += dscore * qs[r * d + dd];
      }
    }
  }
  if (!active) return;
  for (int64_t dd = 0; dd < d; ++dd) {
    grad_k[base + col * d + dd] = dk[dd * tile + lane];
    grad_v[base + col * d + dd] = dv[dd * tile + lane];
  }
}

template <typename T>
__global__ void grad_q_kernel(const T* q, const T* k, const T* v, const T* grad_out,
                              const T* lse, const T* delta, T* grad_q, int64_t t, int64_t d,
                              T scale, int tile) {
  extern __shared__ unsigned char shared_bytes[];
  T* qs = reinterpret_cast<T*>(shared_bytes);  // [d][tile]: this block's queries
  T* gs = qs + d * tile;                        // [d][tile]: their dO
  T* dq = gs + d * tile;                        // [d][tile]: their gradients
  T* ks = dq + d * tile;                        // [tile][d]: a tile of keys
  T* vs = ks + tile * d;                        // [tile][d]: and values
  const int64_t head = blockIdx.y, base = head * t * d;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int lane = threadIdx.x;
  const int64_t row = r0 + lane;
  const bool active = row < t;
  own_row(q + base, row, t, d, tile, qs);
  own_row(grad_out + base, row, t, d, tile, gs);
  zero_column(d, tile, dq);
  const T row_lse = active ? lse[head * t + row] : T(0);
  const T row_delta = active ? delta[head * t + row] : T(0);
  const int64_t keys = r0 + tile < t ? r0 + tile : t;
  for (int64_t c0 = 0; c0 < keys; c0 += tile) {
    const int nc = static_cast<int>(keys - c0 < tile ? keys - c0 : tile);
    __syncthreads();
    stage_rows(k + base, c0, nc, d, ks);
    stage_rows(v + base, c0, nc, d, vs);
    __syncthreads();
    if (!active) continue;
    for (int c = 0; c < nc && c0 + c <= row; ++c) {
      T dot = 0, dp = 0;
      for (int64_t dd = 0; dd < d; ++dd) {
        dot += qs[dd * tile + lane] * ks[c * d + dd];
        dp += gs[dd * tile + lane] * vs[c * d + dd];
      }
      const T p = exp(dot * scale - row_lse);
      const T dscore = p * (dp - row_delta) * scale;
      for (int64_t dd = 0; dd < d; ++dd) dq[dd * tile + lane] += dscore * ks[c * d + dd];
    }
  }
  if (!active) return;
  for (int64_t dd = 0; dd < d; ++dd) grad_q[base + row * d + dd] = dq[dd * tile + lane];
}

// f32 and f64 only: causal_attention (tensor/ops_attention.cc) widens the 2-byte floats.
#define TS_ATTENTION_DISPATCH(DTYPE, NAME, ...) \
  switch (DTYPE) {                              \
    TS_CUDA_CASE(kF32, float, __VA_ARGS__)      \
    TS_CUDA_CASE(kF64, double, __VA_ARGS__)     \
    default:                                    \
      fail_dtype(NAME, DTYPE);                  \
  }

dim3 grid(int64_t t, int tile, int64_t heads) {
  if (heads > 65535) {
    throw std::invalid_argument("causal_attention: the CUDA kernels take at most 65535 (batch x "
                                "head) pairs, got " + std::to_string(heads));
  }
  return dim3(static_cast<unsigned>((t + tile - 1) / tile), static_cast<unsigned>(heads));
}

}  // namespace

void launch_causal_attention(const void* q, const void* k, const void* v, void* out, void* lse,
                             DType dtype, int64_t heads, int64_t t, int64_t d, double scale,
                             cudaStream_t s) {
  if (heads == 0 || t == 0) return;
  TS_ATTENTION_DISPATCH(dtype, "causal_attention", [&] {
    const int tile = tile_rows<scalar_t>(4 * d, "causal_attention");
    const size_t bytes = sizeof(scalar_t) * 4 * d * tile;
    forward_kernel<scalar_t><<<grid(t, tile, heads), tile, bytes, s>>>(
        static_cast<const scalar_t*>(q), static_cast<const scalar_t*>(k),
        static_cast<const scalar_t*>(v), static_cast<scalar_t*>(out),
        static_cast<scalar_t*>(lse), t, d, static_cast<scalar_t>(scale), tile);
  });
  check_launch("causal_attention");
}

void launch_causal_attention_backward(const void* grad_out, const void* q, const void* k,
                                      const void* v, const void* out, const void* lse,
                                      void* delta, void* grad_q, void* grad_k, void* grad_v,
                                      DType dtype, int64_t heads, int64_t t, int64_t d,
                                      double scale, cudaStream_t s) {
  if (heads == 0 || t == 0) return;
  TS_ATTENTION_DISPATCH(dtype, "causal_attention_backward", [&] {
    using T = scalar_t;
    const T* g = static_cast<const T*>(grad_out);
    const T *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k),
            *vp = static_cast<const T*>(v), *lp = static_cast<const T*>(lse);
    T* dp = static_cast<T*>(delta);
    delta_kernel<T><<<blocks_for(heads * t), kThreads, 0, s>>>(g, static_cast<const T*>(out),
                                                               dp, heads * t, d);
    check_launch("causal_attention_backward (delta)");
    const int kv_tile = tile_rows<T>(6 * d + 2, "causal_attention_backward");
    grad_kv_kernel<T><<<grid(t, kv_tile, heads), kv_tile, sizeof(T) * (6 * d + 2) * kv_tile, s>>>(
        qp, kp, vp, g, lp, dp, static_cast<T*>(grad_k), static_cast<T*>(grad_v), t, d,
        static_cast<T>(scale), kv_tile);
    check_launch("causal_attention_backward (dK, dV)");
    const int q_tile = tile_rows<T>(5 * d, "causal_attention_backward");
    grad_q_kernel<T><<<grid(t, q_tile, heads), q_tile, sizeof(T) * 5 * d * q_tile, s>>>(
        qp, kp, vp, g, lp, dp, static_cast<T*>(grad_q), t, d, static_cast<T>(scale), q_tile);
  });
  check_launch("causal_attention_backward (dQ)");
}

}  // namespace cuda
}  // namespace tessera
