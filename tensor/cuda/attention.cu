// Causal attention on CUDA: a straightforward blocked version of FlashAttention's algorithm
// (tensor/cpu/attention.cc explains it), one thread per query (or key) row and tiles of rows
// staged in shared memory. Like the CPU kernels it never stores the T x T scores: forward
// keeps O and the row logsumexp L, backward recomputes P = exp(s q.k - L) wherever it needs it.
// The mask is by absolute positions (qpos per query row, kpos per key row; query r sees key c
// when kpos[c] <= qpos[r]), so one kernel serves plain causal attention and ring attention's
// blocks; a tile no thread of the block can see is skipped whole (__syncthreads_or), and a row
// that sees no key gets O = 0, L = -inf.
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

// The smallest (or largest) of positions [p0, p0 + n).
__device__ int64_t min_position(const int64_t* pos, int64_t p0, int n) {
  int64_t m = pos[p0];
  for (int i = 1; i < n; ++i) m = pos[p0 + i] < m ? pos[p0 + i] : m;
  return m;
}
__device__ int64_t max_position(const int64_t* pos, int64_t p0, int n) {
  int64_t m = pos[p0];
  for (int i = 1; i < n; ++i) m = pos[p0 + i] > m ? pos[p0 + i] : m;
  return m;
}

template <typename T>
__global__ void forward_kernel(const T* q, const T* k, const T* v, const int64_t* qpos,
                               const int64_t* kpos, T* out, T* lse, int64_t tq, int64_t tk,
                               int64_t d, T scale, int tile) {
  extern __shared__ unsigned char shared_bytes[];
  T* qs = reinterpret_cast<T*>(shared_bytes);  // [d][tile]: this block's queries
  T* acc = qs + d * tile;                       // [d][tile]: their unnormalized outputs
  T* ks = acc + d * tile;                       // [tile][d]: a tile of keys
  T* vs = ks + tile * d;                        // [tile][d]: and of values
  const int64_t head = blockIdx.y, q_base = head * tq * d, k_base = head * tk * d;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int lane = threadIdx.x;
  const int64_t row = r0 + lane;
  const bool active = row < tq;
  const int64_t p = active ? qpos[row] : -1;
  own_row(q + q_base, row, tq, d, tile, qs);
  zero_column(d, tile, acc);
  T m = -INFINITY, l = 0;
  T s[kMaxTile];
  for (int64_t c0 = 0; c0 < tk; c0 += tile) {
    const int nc = static_cast<int>(tk - c0 < tile ? tk - c0 : tile);
    // A barrier (the previous tile is consumed) that also tells whether anyone sees this tile.
    const bool sees = active && min_position(kpos, c0, nc) <= p;
    if (!__syncthreads_or(sees)) continue;
    stage_rows(k + k_base, c0, nc, d, ks);
    stage_rows(v + k_base, c0, nc, d, vs);
    __syncthreads();
    if (!sees) continue;
    T tile_max = -INFINITY;  // finite: this row sees some key of the tile
    for (int c = 0; c < nc; ++c) {
      if (kpos[c0 + c] > p) {
        s[c] = -INFINITY;
        continue;
      }
      T dot = 0;
      for (int64_t dd = 0; dd < d; ++dd) dot += qs[dd * tile + lane] * ks[c * d + dd];
      s[c] = dot * scale;
      tile_max = s[c] > tile_max ? s[c] : tile_max;
    }
    const T m_new = m > tile_max ? m : tile_max;
    const T rescale = exp(m - m_new);  // 0 for the first tile's m = -inf
    l *= rescale;
    for (int c = 0; c < nc; ++c) {
      s[c] = exp(s[c] - m_new);  // hidden keys: exp(-inf) = 0
      l += s[c];
    }
    for (int64_t dd = 0; dd < d; ++dd) {
      T o = acc[dd * tile + lane] * rescale;
      for (int c = 0; c < nc; ++c) o += s[c] * vs[c * d + dd];
      acc[dd * tile + lane] = o;
    }
    m = m_new;
  }
  if (!active) return;
  const T inv = l > 0 ? T(1) / l : T(0);  // a row that saw no key: O = 0, L = -inf
  for (int64_t dd = 0; dd < d; ++dd) out[q_base + row * d + dd] = acc[dd * tile + lane] * inv;
  lse[head * tq + row] = l > 0 ? m + log(l) : -INFINITY;
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
__global__ void grad_kv_kernel(const T* q, const T* k, const T* v, const int64_t* qpos,
                               const int64_t* kpos, const T* grad_out, const T* lse,
                               const T* delta, T* grad_k, T* grad_v, int64_t tq, int64_t tk,
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
  const int64_t head = blockIdx.y, q_base = head * tq * d, k_base = head * tk * d;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int lane = threadIdx.x;
  const int64_t col = c0 + lane;  // this thread's key
  const bool active = col < tk;
  const int64_t p = active ? kpos[col] : 0;
  own_row(k + k_base, col, tk, d, tile, kk);
  own_row(v + k_base, col, tk, d, tile, vv);
  zero_column(d, tile, dk);
  zero_column(d, tile, dv);
  for (int64_t r0 = 0; r0 < tq; r0 += tile) {
    const int nr = static_cast<int>(tq - r0 < tile ? tq - r0 : tile);
    // Query tiles before this thread's key see none of it; skip tiles nobody here sees.
    const bool seen = active && max_position(qpos, r0, nr) >= p;
    if (!__syncthreads_or(seen)) continue;
    stage_rows(q + q_base, r0, nr, d, qs);
    stage_rows(grad_out + q_base, r0, nr, d, gs);
    for (int i = threadIdx.x; i < nr; i += blockDim.x) {
      ls[i] = lse[head * tq + r0 + i];
      ds[i] = delta[head * tq + r0 + i];
    }
    __syncthreads();
    if (!seen) continue;
    for (int r = 0; r < nr; ++r) {
      // Query r0 + r does not see this key, or sees no key at all (L = -inf, P = 0).
      if (qpos[r0 + r] < p || ls[r] == -INFINITY) continue;
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
    grad_k[k_base + col * d + dd] = dk[dd * tile + lane];
    grad_v[k_base + col * d + dd] = dv[dd * tile + lane];
  }
}

template <typename T>
__global__ void grad_q_kernel(const T* q, const T* k, const T* v, const int64_t* qpos,
                              const int64_t* kpos, const T* grad_out, const T* lse,
                              const T* delta, T* grad_q, int64_t tq, int64_t tk, int64_t d,
                              T scale, int tile) {
  extern __shared__ unsigned char shared_bytes[];
  T* qs = reinterpret_cast<T*>(shared_bytes);  // [d][tile]: this block's queries
  T* gs = qs + d * tile;                        // [d][tile]: their dO
  T* dq = gs + d * tile;                        // [d][tile]: their gradients
  T* ks = dq + d * tile;                        // [tile][d]: a tile of keys
  T* vs = ks + tile * d;                        // [tile][d]: and values
  const int64_t head = blockIdx.y, q_base = head * tq * d, k_base = head * tk * d;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * tile;
  const int lane = threadIdx.x;
  const int64_t row = r0 + lane;
  const T row_lse = row < tq ? lse[head * tq + row] : T(0);
  const bool active = row < tq && row_lse != -INFINITY;  // L = -inf: sees no key, dQ = 0
  const int64_t p = row < tq ? qpos[row] : -1;
  own_row(q + q_base, row, tq, d, tile, qs);
  own_row(grad_out + q_base, row, tq, d, tile, gs);
  zero_column(d, tile, dq);
  const T row_delta = row < tq ? delta[head * tq + row] : T(0);
  for (int64_t c0 = 0; c0 < tk; c0 += tile) {
    const int nc = static_cast<int>(tk - c0 < tile ? tk - c0 : tile);
    const bool sees = active && min_position(kpos, c0, nc) <= p;
    if (!__syncthreads_or(sees)) continue;
    stage_rows(k + k_base, c0, nc, d, ks);
    stage_rows(v + k_base, c0, nc, d, vs);
    __syncthreads();
    if (!sees) continue;
    for (int c = 0; c < nc; ++c) {
      if (kpos[c0 + c] > p) continue;
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
  if (row >= tq) return;
  for (int64_t dd = 0; dd < d; ++dd) grad_q[q_base + row * d + dd] = dq[dd * tile + lane];
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

void launch_causal_attention(const void* q, const void* k, const void* v, const int64_t* qpos,
                             const int64_t* kpos, void* out, void* lse, DType dtype,
                             int64_t heads, int64_t tq, int64_t tk, int64_t d, double scale,
                             cudaStream_t s) {
  if (heads == 0 || tq == 0 || tk == 0) return;
  TS_ATTENTION_DISPATCH(dtype, "causal_attention", [&] {
    const int tile = tile_rows<scalar_t>(4 * d, "causal_attention");
    const size_t bytes = sizeof(scalar_t) * 4 * d * tile;
    forward_kernel<scalar_t><<<grid(tq, tile, heads), tile, bytes, s>>>(
        static_cast<const scalar_t*>(q), static_cast<const scalar_t*>(k),
        static_cast<const scalar_t*>(v), qpos, kpos, static_cast<scalar_t*>(out),
        static_cast<scalar_t*>(lse), tq, tk, d, static_cast<scalar_t>(scale), tile);
  });
  check_launch("causal_attention");
}

void launch_causal_attention_backward(const void* grad_out, const void* q, const void* k,
                                      const void* v, const int64_t* qpos, const int64_t* kpos,
                                      const void* out, const void* lse, void* delta,
                                      void* grad_q, void* grad_k, void* grad_v, DType dtype,
                                      int64_t heads, int64_t tq, int64_t tk, int64_t d,
                                      double scale, cudaStream_t s) {
  if (heads == 0 || tq == 0 || tk == 0) return;
  TS_ATTENTION_DISPATCH(dtype, "causal_attention_backward", [&] {
    using T = scalar_t;
    const T* g = static_cast<const T*>(grad_out);
    const T *qp = static_cast<const T*>(q), *kp = static_cast<const T*>(k),
            *vp = static_cast<const T*>(v), *lp = static_cast<const T*>(lse);
    T* dp = static_cast<T*>(delta);
    delta_kernel<T><<<blocks_for(heads * tq), kThreads, 0, s>>>(g, static_cast<const T*>(out),
                                                                dp, heads * tq, d);
    check_launch("causal_attention_backward (delta)");
    const int kv_tile = tile_rows<T>(6 * d + 2, "causal_attention_backward");
    grad_kv_kernel<T><<<grid(tk, kv_tile, heads), kv_tile, sizeof(T) * (6 * d + 2) * kv_tile, s>>>(
        qp, kp, vp, qpos, kpos, g, lp, dp, static_cast<T*>(grad_k), static_cast<T*>(grad_v), tq,
        tk, d, static_cast<T>(scale), kv_tile);
    check_launch("causal_attention_backward (dK, dV)");
    const int q_tile = tile_rows<T>(5 * d, "causal_attention_backward");
    grad_q_kernel<T><<<grid(tq, q_tile, heads), q_tile, sizeof(T) * 5 * d * q_tile, s>>>(
        qp, kp, vp, qpos, kpos, g, lp, dp, static_cast<T*>(grad_q), tq, tk, d,
        static_cast<T>(scale), q_tile);
  });
  check_launch("causal_attention_backward (dQ)");
}

}  // namespace cuda
}  // namespace tessera
