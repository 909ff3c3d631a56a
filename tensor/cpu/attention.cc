// Causal attention on the CPU, FlashAttention-2's algorithm: O = softmax(mask(s Q K^T)) V for
// every (batch, head), computed block by block so that the T x T matrix of scores is never
// stored. The mask is by absolute positions: query row r (at position qpos[r]) sees key row c
// (at kpos[c]) when kpos[c] <= qpos[r]. Plain causal attention is qpos = kpos = 0, 1, ..., T-1;
// ring attention (dist/context_parallel/) attends a rank's queries to another rank's block of
// keys, and a block may then be wholly hidden from a row: that row gets O = 0 and L = -inf
// (the sum over no keys), which the ring's combine step reads as weight 0. Per (batch, head)
// only O and one number per query row are kept: the row's logsumexp L = log sum_k exp(s q.k),
// from which backward recomputes any probability as P = exp(s q.k - L).
//
// Forward, one task per (batch, head, block of queries), the key blocks taken in order:
//
//              keys ->   block 0   block 1   block 2
//   queries    +--------+---------+---------+
//   block 0    | \      |  (skip) |  (skip) |   a key block right of the diagonal is
//   block 1    |   all  | \  diag |  (skip) |   never touched: about half the work
//   block 2    |   all  |   all   | \  diag |
//              +--------+---------+---------+
//
// (with positions, a block pair is skipped when its smallest key position is past its largest
// query position, and masked element by element only when the two ranges overlap).
//
// Each query row keeps a running maximum m, a running sum l of exp(score - m) and an
// unnormalized output o. A new key block with scores S: m' = max(m, rowmax S), P = exp(S - m'),
// and the old l and o are worth exp(m - m') of the new scale:
//     l = exp(m - m') l + rowsum P,    o = exp(m - m') o + P V_block.
// After the last block O = o / l and L = m + log l (dividing once at the end, not per block,
// is FlashAttention-2's change to the first version).
//
// Backward, one task per (batch, head), key blocks outer, query blocks from the diagonal on
// inner. With D_r = sum_d dO[r][d] O[r][d] (= sum_k P[r][k] dP[r][k]) computed once per row:
//     P = exp(s Q K^T - L), dV += P^T dO, dP = dO V^T, dS = P (dP - D), dK += s dS^T Q,
//     dQ += s dS K
// dK and dV of the key block stay in scratch until its last query block; dQ is summed over key
// blocks in scratch of the task's own (batch, head), so no two threads add to one row and the
// result is the same whatever the thread count.
//
// Layout: every block product is C (+)= A B with B and C read along rows of whole vectors
// (attention_tiles.h). The queries' side is kept transposed, [D][queries], so that the scores
// come out as S^T [keys][queries]: the column-wise max and sum over keys then run down
// vectors of queries, and P^T is at once the A of dV += P^T dO. The rows of the query side are
// padded to whole vectors (zeros; scores of padded queries are never used).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/cpu/attention_tiles.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

using attention::ScalarOps;
using attention::SimdOps;

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// One call's sizes: `heads` (batch x head) independent problems of tq queries and tk keys.
struct Geometry {
  int64_t heads, tq, tk, d;
  int64_t br, bc;  // queries and keys per block
  int64_t nq, nk;  // query and key blocks
  int64_t ld;      // row stride of a block's query-side scratch: br padded to whole vectors
  int64_t dp;      // D padded to whole vectors

  Geometry(const Tensor& q, const Tensor& k, const AttentionBlocks& blocks, int lanes)
      : heads(q.size(0) * q.size(1)), tq(q.size(2)), tk(k.size(2)), d(q.size(3)),
        br(std::min(blocks.query, tq)), bc(std::min(blocks.key, tk)), nq((tq + br - 1) / br),
        nk((tk + bc - 1) / bc), ld(round_up(br, lanes)), dp(round_up(d, lanes)) {}

  int64_t forward_scratch() const { return (2 * d + bc + 5) * ld; }
  int64_t backward_scratch() const {
    return nq * (3 * d + 2) * ld + 2 * bc * (ld + dp) + (dp != d ? 2 * tq * dp : 0);
  }
};

// The smallest and largest position in each block of `block` rows: which block pairs the mask
// hides entirely, which it leaves whole, and which it cuts.
struct BlockSpans {
  std::vector<int64_t> lo, hi;

  BlockSpans(const int64_t* positions, int64_t rows, int64_t block) {
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t* first = positions + r0;
      const int64_t* last = positions + std::min(rows, r0 + block);
      lo.push_back(*std::min_element(first, last));
      hi.push_back(*std::max_element(first, last));
    }
  }
};

struct Positions {
  const int64_t *q, *k;  // per query row and per key row
  BlockSpans qs, ks;

  Positions(const Tensor& q_positions, const Tensor& k_positions, const Geometry& g)
      : q(q_positions.data<int64_t>()), k(k_positions.data<int64_t>()), qs(q, g.tq, g.br),
        ks(k, g.tk, g.bc) {}
  bool hidden(int64_t qb, int64_t kb) const { return ks.lo[kb] > qs.hi[qb]; }
  bool whole(int64_t qb, int64_t kb) const { return ks.hi[kb] <= qs.lo[qb]; }
};

template <typename T>
struct ForwardArgs {
  const T *q, *k, *v;
  T *out, *lse;
  T scale;
  const Positions* pos;
};

template <typename T>
struct BackwardArgs {
  const T *q, *k, *v, *out, *lse, *grad_out;
  T *grad_q, *grad_k, *grad_v;
  T scale;
  const Positions* pos;
};

// The mask on a block of S^T [keys c0.. c0+nc) x [queries r0.. r0+nr) that it cuts: key c is
// hidden from query r when kpos[c] > qpos[r]. Padded query columns are left alone (their scores
// are never used).
template <typename T>
TS_SIMD_INLINE void mask_block(const int64_t* kpos, int64_t nc, const int64_t* qpos, int64_t nr,
                               T* st, int64_t ld) {
  const T hidden = -std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t r = 0; r < nr; ++r) {
      if (kpos[c] > qpos[r]) st[c * ld + r] = hidden;
    }
  }
}

// Forward for query block qb of head bh.
template <typename Ops>
TS_SIMD_INLINE void forward_block(const Geometry& g, const ForwardArgs<typename Ops::Scalar>& a,
                                  int64_t bh, int64_t qb, typename Ops::Scalar* scratch) {
  using T = typename Ops::Scalar;
  const int64_t tq = g.tq, tk = g.tk, d = g.d, ld = g.ld;
  const int64_t r0 = qb * g.br, nr = std::min(g.br, tq - r0), nrp = round_up(nr, Ops::kLanes);
  const T* q = a.q + bh * tq * d;
  const T* k = a.k + bh * tk * d;
  const T* v = a.v + bh * tk * d;
  T* qt = scratch;        // [d][ld]  Q block, transposed
  T* ot = qt + d * ld;    // [d][ld]  unnormalized O block, transposed
  T* st = ot + d * ld;    // [bc][ld] S^T, then P^T
  T* m = st + g.bc * ld;  // running max, per query
  T* m_new = m + ld;
  T* l = m_new + ld;  // running sum of exp(score - m)
  T* rescale = l + ld;
  T* shift = rescale + ld;  // m_new, or 0 where it is -inf (no key seen yet)
  for (int64_t dd = 0; dd < d; ++dd) {
    for (int64_t r = 0; r < nrp; ++r) qt[dd * ld + r] = r < nr ? q[(r0 + r) * d + dd] : T(0);
    for (int64_t r = 0; r < nrp; ++r) ot[dd * ld + r] = 0;
  }
  for (int64_t r = 0; r < nrp; ++r) m[r] = -std::numeric_limits<T>::infinity(), l[r] = 0;

  const Positions& pos = *a.pos;
  for (int64_t kb = 0; kb < g.nk; ++kb) {
    if (pos.hidden(qb, kb)) continue;  // every key of the block is after every query
    const int64_t c0 = kb * g.bc, nc = std::min(g.bc, tk - c0);
    Ops::mm(nc, nrp, d, k + c0 * d, d, 1, qt, ld, st, ld, a.scale, false);  // S^T = s K Q^T
    if (!pos.whole(qb, kb)) mask_block(pos.k + c0, nc, pos.q + r0, nr, st, ld);
    for (int64_t r = 0; r < nrp; ++r) m_new[r] = m[r];
    for (int64_t c = 0; c < nc; ++c) {
      for (int64_t r = 0; r < nrp; ++r) m_new[r] = std::max(m_new[r], st[c * ld + r]);
    }
    // A row that has seen no key yet keeps m_new = -inf; subtracting 0 instead keeps its
    // exp(-inf - shift) = 0 rather than exp(-inf + inf) = NaN. Elsewhere exp(m - m_new) is 0
    // for a first block's m = -inf.
    for (int64_t r = 0; r < nrp; ++r) {
      shift[r] = m_new[r] == -std::numeric_limits<T>::infinity() ? T(0) : m_new[r];
      rescale[r] = m[r];
    }
    Ops::exp_sub(1, nrp, rescale, ld, shift);
    Ops::exp_sub(nc, nrp, st, ld, shift);  // P^T, hidden keys exp(-inf) = 0
    for (int64_t r = 0; r < nrp; ++r) l[r] *= rescale[r];
    for (int64_t c = 0; c < nc; ++c) {
      for (int64_t r = 0; r < nrp; ++r) l[r] += st[c * ld + r];
    }
    for (int64_t dd = 0; dd < d; ++dd) {
      for (int64_t r = 0; r < nrp; ++r) ot[dd * ld + r] *= rescale[r];
    }
    // O^T += V^T P^T, with A(dd, c) = V[c0 + c][dd] read in place.
    Ops::mm(d, nrp, nc, v + c0 * d, 1, d, st, ld, ot, ld, T(1), true);
    std::swap(m, m_new);
  }
  T* out = a.out + bh * tq * d;
  T* lse = a.lse + bh * tq;
  for (int64_t r = 0; r < nr; ++r) {
    // A row that saw no key: O = 0 and L = log 0 = -inf.
    const T inv = l[r] > 0 ? T(1) / l[r] : T(0);
    for (int64_t dd = 0; dd < d; ++dd) out[(r0 + r) * d + dd] = ot[dd * ld + r] * inv;
    lse[r0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : -std::numeric_limits<T>::infinity();
  }
}

// Backward for head bh.
template <typename Ops>
TS_SIMD_INLINE void backward_head(const Geometry& g,
                                  const BackwardArgs<typename Ops::Scalar>& a, int64_t bh,
                                  typename Ops::Scalar* scratch) {
  using T = typename Ops::Scalar;
  const int64_t tq = g.tq, tk = g.tk, d = g.d, ld = g.ld, dp = g.dp, block = d * ld;
  const int64_t q_offset = bh * tq * d, k_offset = bh * tk * d;
  const T *q = a.q + q_offset, *k = a.k + k_offset, *v = a.v + k_offset;
  const T *o = a.out + q_offset, *dout = a.grad_out + q_offset, *lse = a.lse + bh * tq;
  const Positions& pos = *a.pos;
  T* qt = scratch;                // [nq][d][ld]  Q, transposed by blocks
  T* dot = qt + g.nq * block;     // [nq][d][ld]  dO, likewise
  T* dqt = dot + g.nq * block;    // [nq][d][ld]  dQ, likewise, summed over key blocks
  T* lse_p = dqt + g.nq * block;  // [nq][ld]     L; +inf on padding (and for L = -inf), P = 0
  T* delta = lse_p + g.nq * ld;   // [nq][ld]     D = rowsum(dO * O)
  T* st = delta + g.nq * ld;      // [bc][ld]     S^T, then P^T
  T* ds = st + g.bc * ld;         // [bc][ld]     dP^T, then s dS^T
  T* dk = ds + g.bc * ld;         // [bc][dp]     the key block's dK
  T* dv = dk + g.bc * dp;         // [bc][dp]     and dV
  for (int64_t qb = 0; qb < g.nq; ++qb) {
    const int64_t r0 = qb * g.br, nr = std::min(g.br, tq - r0);
    for (int64_t dd = 0; dd < d; ++dd) {
      for (int64_t r = 0; r < ld; ++r) {
        const bool real = r < nr;
        qt[qb * block + dd * ld + r] = real ? q[(r0 + r) * d + dd] : T(0);
        dot[qb * block + dd * ld + r] = real ? dout[(r0 + r) * d + dd] : T(0);
        dqt[qb * block + dd * ld + r] = 0;
      }
    }
    for (int64_t r = 0; r < ld; ++r) {
      T sum = 0;
      if (r < nr) {
        for (int64_t dd = 0; dd < d; ++dd) sum += dout[(r0 + r) * d + dd] * o[(r0 + r) * d + dd];
      }
      delta[qb * ld + r] = sum;
      // A row that sees no key at all (L = -inf, only outside ring attention's use) has P = 0.
      const T inf = std::numeric_limits<T>::infinity();
      lse_p[qb * ld + r] = r < nr && lse[r0 + r] != -inf ? lse[r0 + r] : inf;
    }
  }
  // Q and dO by rows, as the B of dK += dS^T Q and dV += P^T dO: the inputs themselves, or
  // copies with rows padded to whole vectors.
  const T *q_rows = q, *dout_rows = dout;
  int64_t ldr = d;
  if (dp != d) {
    T* padded = dv + g.bc * dp;
    for (int64_t r = 0; r < tq; ++r) {
      for (int64_t dd = 0; dd < dp; ++dd) {
        padded[r * dp + dd] = dd < d ? q[r * d + dd] : T(0);
        padded[(tq + r) * dp + dd] = dd < d ? dout[r * d + dd] : T(0);
      }
    }
    q_rows = padded, dout_rows = padded + tq * dp, ldr = dp;
  }

  for (int64_t kb = 0; kb < g.nk; ++kb) {
    const int64_t c0 = kb * g.bc, nc = std::min(g.bc, tk - c0);
    std::fill(dk, dk + g.bc * dp, T(0));
    std::fill(dv, dv + g.bc * dp, T(0));
    for (int64_t qb = 0; qb < g.nq; ++qb) {
      if (pos.hidden(qb, kb)) continue;  // query blocks before these keys see none of them
      const int64_t r0 = qb * g.br, nr = std::min(g.br, tq - r0);
      const int64_t nrp = round_up(nr, Ops::kLanes);
      Ops::mm(nc, nrp, d, k + c0 * d, d, 1, qt + qb * block, ld, st, ld, a.scale, false);
      if (!pos.whole(qb, kb)) mask_block(pos.k + c0, nc, pos.q + r0, nr, st, ld);
      Ops::exp_sub(nc, nrp, st, ld, lse_p + qb * ld);                           // P^T
      Ops::mm(nc, dp, nr, st, ld, 1, dout_rows + r0 * ldr, ldr, dv, dp, T(1), true);  // dV
      Ops::mm(nc, nrp, d, v + c0 * d, d, 1, dot + qb * block, ld, ds, ld, T(1), false);  // dP^T
      const T* dr = delta + qb * ld;
      for (int64_t c = 0; c < nc; ++c) {
        for (int64_t r = 0; r < nrp; ++r) {
          ds[c * ld + r] = st[c * ld + r] * (ds[c * ld + r] - dr[r]) * a.scale;
        }
      }
      Ops::mm(nc, dp, nr, ds, ld, 1, q_rows + r0 * ldr, ldr, dk, dp, T(1), true);  // dK
      // dQ^T += K^T (s dS^T), with A(dd, c) = K[c0 + c][dd] read in place.
      Ops::mm(d, nrp, nc, k + c0 * d, 1, d, ds, ld, dqt + qb * block, ld, T(1), true);
    }
    for (int64_t c = 0; c < nc; ++c) {
      for (int64_t dd = 0; dd < d; ++dd) {
        a.grad_k[k_offset + (c0 + c) * d + dd] = dk[c * dp + dd];
        a.grad_v[k_offset + (c0 + c) * d + dd] = dv[c * dp + dd];
      }
    }
  }
  for (int64_t r = 0; r < tq; ++r) {
    const int64_t qb = r / g.br;
    for (int64_t dd = 0; dd < d; ++dd) {
      a.grad_q[q_offset + r * d + dd] = dqt[qb * block + dd * ld + (r - qb * g.br)];
    }
  }
}

// The entry points per instruction set; each inlines the templates above for its target.
TS_AVX512 void forward_block_avx512(const Geometry& g, const ForwardArgs<float>& a, int64_t bh,
                                    int64_t qb, float* scratch) {
  forward_block<SimdOps<16>>(g, a, bh, qb, scratch);
}
TS_AVX2 void forward_block_avx2(const Geometry& g, const ForwardArgs<float>& a, int64_t bh,
                                int64_t qb, float* scratch) {
  forward_block<SimdOps<8>>(g, a, bh, qb, scratch);
}
template <typename T>
void forward_block_scalar(const Geometry& g, const ForwardArgs<T>& a, int64_t bh, int64_t qb,
                          T* scratch) {
  forward_block<ScalarOps<T>>(g, a, bh, qb, scratch);
}
TS_AVX512 void backward_head_avx512(const Geometry& g, const BackwardArgs<float>& a, int64_t bh,
                                    float* scratch) {
  backward_head<SimdOps<16>>(g, a, bh, scratch);
}
TS_AVX2 void backward_head_avx2(const Geometry& g, const BackwardArgs<float>& a, int64_t bh,
                                float* scratch) {
  backward_head<SimdOps<8>>(g, a, bh, scratch);
}
template <typename T>
void backward_head_scalar(const Geometry& g, const BackwardArgs<T>& a, int64_t bh, T* scratch) {
  backward_head<ScalarOps<T>>(g, a, bh, scratch);
}

// The kernels this machine runs for T, and the vector width their scratch is laid out for.
template <typename T>
struct Kernels {
  int lanes = 1;
  void (*forward)(const Geometry&, const ForwardArgs<T>&, int64_t, int64_t, T*) =
      forward_block_scalar<T>;
  void (*backward)(const Geometry&, const BackwardArgs<T>&, int64_t, T*) =
      backward_head_scalar<T>;
};

template <typename T>
Kernels<T> kernels() {
  Kernels<T> chosen;
  if constexpr (std::is_same_v<T, float>) {
    switch (simd::level()) {
      case simd::Level::kAvx512:
        chosen = {16, forward_block_avx512, backward_head_avx512};
        break;
      case simd::Level::kAvx2:
        chosen = {8, forward_block_avx2, backward_head_avx2};
        break;
      default:
        break;
    }
  }
  return chosen;
}

// Query block `i` of a head's nq, in the order 0, nq-1, 1, nq-2, ...: block i costs about i + 1
// key blocks, so any run of consecutive tasks (what parallel_for gives each thread) mixes
// cheap and dear ones.
int64_t balanced_block(int64_t i, int64_t nq) { return i % 2 == 0 ? i / 2 : nq - 1 - i / 2; }

template <typename T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_positions,
             const Tensor& k_positions, double scale, const AttentionBlocks& blocks,
             const Tensor& out, const Tensor& lse) {
  const Kernels<T> run = kernels<T>();
  const Geometry g(q, k, blocks, run.lanes);
  const Positions pos(q_positions, k_positions, g);
  const ForwardArgs<T> args{q.data<T>(),   k.data<T>(),           v.data<T>(), out.data<T>(),
                            lse.data<T>(), static_cast<T>(scale), &pos};
  parallel_for(g.heads * g.nq, 1, [&](int64_t i0, int64_t i1) {
    // Scratch for one block at a time: its size does not grow with T.
    Tensor scratch = empty({g.forward_scratch()}, q.dtype());
    for (int64_t i = i0; i < i1; ++i) {
      run.forward(g, args, i / g.nq, balanced_block(i % g.nq, g.nq), scratch.data<T>());
    }
  });
}

template <typename T>
void backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& out, const Tensor& lse, const Tensor& q_positions,
              const Tensor& k_positions, double scale, const AttentionBlocks& blocks,
              const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const Kernels<T> run = kernels<T>();
  const Geometry g(q, k, blocks, run.lanes);
  const Positions pos(q_positions, k_positions, g);
  const BackwardArgs<T> args{q.data<T>(),      k.data<T>(),      v.data<T>(),
                             out.data<T>(),    lse.data<T>(),    grad_out.data<T>(),
                             grad_q.data<T>(), grad_k.data<T>(), grad_v.data<T>(),
                             static_cast<T>(scale), &pos};
  parallel_for(g.heads, 1, [&](int64_t h0, int64_t h1) {
    // Scratch for one head at a time: a few copies of its [T, D] operands, linear in T.
    Tensor scratch = empty({g.backward_scratch()}, q.dtype());
    for (int64_t bh = h0; bh < h1; ++bh) run.backward(g, args, bh, scratch.data<T>());
  });
}

}  // namespace

void CpuBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& q_positions, const Tensor& k_positions,
                                  double scale, const AttentionBlocks& blocks, const Tensor& out,
                                  const Tensor& logsumexp) {
  if (q.numel() == 0 || k.numel() == 0) return;
  if (q.dtype() == kF64) {
    forward<double>(q, k, v, q_positions, k_positions, scale, blocks, out, logsumexp);
  } else {
    TS_CHECK(q.dtype() == kF32, "causal_attention: the CPU kernel takes f32 or f64, got ",
             q.dtype());
    forward<float>(q, k, v, q_positions, k_positions, scale, blocks, out, logsumexp);
  }
}

void CpuBackend::causal_attention_backward(const Tensor& grad_out, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor& out,
                                           const Tensor& logsumexp, const Tensor& q_positions,
                                           const Tensor& k_positions, double scale,
                                           const AttentionBlocks& blocks, const Tensor& grad_q,
                                           const Tensor& grad_k, const Tensor& grad_v) {
  if (q.numel() == 0 || k.numel() == 0) return;
  if (q.dtype() == kF64) {
    backward<double>(grad_out, q, k, v, out, logsumexp, q_positions, k_positions, scale, blocks,
                     grad_q, grad_k, grad_v);
  } else {
    TS_CHECK(q.dtype() == kF32, "causal_attention_backward: the CPU kernel takes f32 or f64, got ",
             q.dtype());
    backward<float>(grad_out, q, k, v, out, logsumexp, q_positions, k_positions, scale, blocks,
                    grad_q, grad_k, grad_v);
  }
}

}  // namespace cpu
}  // namespace tessera
