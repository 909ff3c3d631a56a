// causal_attention_block, combine_attention and causal_attention_block_backward (tensor/ops.h):
// one block of keys at other absolute positions than the queries, the step ring attention is
// made of. Checked against a dense reference with the mask by positions written out here, on
// odd shapes and blocks that do not divide them; a block hidden from every query (O = 0,
// L = -inf, no NaN); and the blocks of a head-tail split combined back into the whole causal
// attention of tests/util/attention_reference.h, forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tests/util/attention_reference.h"
#include "tests/util/expect_error.h"
#include "tests/util/tensor_near.h"

namespace tessera {
namespace {

using testing::expect_error;
using testing::seeded_normal;
using testing::expect_near;
using testing::reference_attention;

constexpr double kInf = std::numeric_limits<double>::infinity();



// Dense f64 attention of q at qpos to k, v at kpos (key c visible to query r when
// kpos[c] <= qpos[r]); rows that see nothing get O = 0, L = -inf. With grad_out, the block's
// gradients given the whole attention's O and L (out, lse): P = exp(S - L),
// dV = P^T dO, dS = P (dO V^T - rowsum(dO O)), dQ = s dS K, dK = s dS^T Q.
struct Dense {
  Tensor out, lse, gq, gk, gv;
};
Dense dense(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
            const std::vector<int64_t>& qpos, const std::vector<int64_t>& kpos,
            const Tensor& grad_out = Tensor(), Tensor out_all = Tensor(),
            Tensor lse_all = Tensor()) {
  const int64_t heads = q.size(0) * q.size(1), tq = q.size(2), tk = k.size(2), d = q.size(3);
  const auto qs = q.contiguous().to_vector<double>(), ks = k.contiguous().to_vector<double>(),
             vs = v.contiguous().to_vector<double>();
  std::vector<double> out(heads * tq * d, 0.0), lse(heads * tq, -kInf);
  std::vector<double> s(tq * tk);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < tq; ++i) {
      double m = -kInf;
      for (int64_t j = 0; j < tk; ++j) {
        double x = -kInf;
        if (kpos[j] <= qpos[i]) {
          x = 0;
          for (int64_t c = 0; c < d; ++c) x += qs[(h * tq + i) * d + c] * ks[(h * tk + j) * d + c];
          x *= scale;
        }
        s[i * tk + j] = x;
        m = std::max(m, x);
      }
      if (m == -kInf) continue;
      double total = 0;
      for (int64_t j = 0; j < tk; ++j) total += std::exp(s[i * tk + j] - m);
      lse[h * tq + i] = m + std::log(total);
      for (int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < tk; ++j) {
          o += std::exp(s[i * tk + j] - m) / total * vs[(h * tk + j) * d + c];
        }
        out[(h * tq + i) * d + c] = o;
      }
    }
  }
  Dense r;
  r.out = from_vector<double>(out, q.shape());
  r.lse = from_vector<double>(lse, {q.size(0), q.size(1), tq});
  if (!grad_out.defined()) return r;
  if (!out_all.defined()) out_all = r.out, lse_all = r.lse;
  const auto gs = grad_out.contiguous().to_vector<double>();
  const auto os = out_all.contiguous().to_vector<double>();
  const auto ls = lse_all.contiguous().to_vector<double>();
  std::vector<double> gq(qs.size(), 0.0), gk(ks.size(), 0.0), gv(vs.size(), 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < tq; ++i) {
      const double l = ls[h * tq + i];
      if (l == -kInf) continue;
      double delta = 0;
      for (int64_t c = 0; c < d; ++c) delta += gs[(h * tq + i) * d + c] * os[(h * tq + i) * d + c];
      for (int64_t j = 0; j < tk; ++j) {
        if (kpos[j] > qpos[i]) continue;
        double x = 0, dp = 0;
        for (int64_t c = 0; c < d; ++c) {
          x += qs[(h * tq + i) * d + c] * ks[(h * tk + j) * d + c];
          dp += gs[(h * tq + i) * d + c] * vs[(h * tk + j) * d + c];
        }
        const double p = std::exp(x * scale - l), ds = p * (dp - delta);
        for (int64_t c = 0; c < d; ++c) {
          gv[(h * tk + j) * d + c] += p * gs[(h * tq + i) * d + c];
          gq[(h * tq + i) * d + c] += scale * ds * ks[(h * tk + j) * d + c];
          gk[(h * tk + j) * d + c] += scale * ds * qs[(h * tq + i) * d + c];
        }
      }
    }
  }
  r.gq = from_vector<double>(gq, q.shape());
  r.gk = from_vector<double>(gk, k.shape());
  r.gv = from_vector<double>(gv, k.shape());
  return r;
}

struct BlockCase {
  AttentionPositions q, k;
  AttentionBlocks blocks;
};

// Odd lengths, two-run positions (head-tail's shape), keys before, across and after the
// queries, and blocks that do not divide the lengths.
std::vector<BlockCase> block_cases() {
  using P = AttentionPositions;
  return {
      {P{{{3, 4}, {20, 3}}}, P{{{0, 5}, {10, 4}}}, {}},
      {P{{{3, 4}, {20, 3}}}, P{{{0, 5}, {10, 4}}}, {2, 3}},
      {P{{{3, 4}, {20, 3}}}, P{{{0, 5}, {10, 4}}}, {1, 7}},
      {P::contiguous(5, 9), P::contiguous(0, 13), {4, 5}},   // keys wholly before some rows
      {P::contiguous(0, 11), P::contiguous(4, 6), {3, 2}},   // early rows see nothing
      {P{{{8, 3}, {0, 4}}}, P{{{6, 5}, {1, 2}}}, {2, 2}},    // runs out of order
      {P::contiguous(0, 17), P::contiguous(0, 17), {5, 3}},  // plain causal
  };
}

TEST(CausalAttentionBlock, MatchesTheDenseReference) {
  uint64_t seed = 1;
  for (const DType dtype : {kF32, kF64}) {
    const double tol = dtype == kF32 ? 1e-5 : 1e-12;
    for (const int64_t d : {3, 8}) {
      for (const BlockCase& c : block_cases()) {
        const int64_t tq = c.q.rows(), tk = c.k.rows();
        const Tensor q = seeded_normal({2, 3, tq, d}, dtype, seed++),
                     k = seeded_normal({2, 3, tk, d}, dtype, seed++),
                     v = seeded_normal({2, 3, tk, d}, dtype, seed++),
                     g = seeded_normal({2, 3, tq, d}, dtype, seed++);
        const double scale = 0.45;
        const Dense ref = dense(q, k, v, scale, c.q.expand(), c.k.expand(), g);
        const auto got = causal_attention_block(q, k, v, scale, c.q, c.k, c.blocks);
        const std::string what =
            "tq=" + std::to_string(tq) + " tk=" + std::to_string(tk) + " d=" + std::to_string(d) +
            " blocks " + std::to_string(c.blocks.query) + "x" + std::to_string(c.blocks.key);
        EXPECT_EQ(got.output.dtype(), dtype == kF64 ? kF64 : kF32);
        expect_near(got.output, ref.out, tol, "output, " + what);
        // Rows that see no key: -inf in both, exactly; the finite rest within tol.
        const Tensor got_hidden = eq(got.logsumexp.to(kF64), -kInf),
                     ref_hidden = eq(ref.lse, -kInf);
        EXPECT_EQ(got_hidden.to(kI64).to_vector<int64_t>(),
                  ref_hidden.to(kI64).to_vector<int64_t>())
            << "rows at -inf, " << what;
        const Tensor zero = scalar_tensor(0.0, kF64);
        expect_near(where(got_hidden, zero, got.logsumexp.to(kF64)),
                    where(ref_hidden, zero, ref.lse), tol, "logsumexp, " + what);
        const auto grads = causal_attention_block_backward(g, q, k, v, got.output, got.logsumexp,
                                                           scale, c.q, c.k, c.blocks);
        expect_near(grads.q, ref.gq, tol, "grad q, " + what);
        expect_near(grads.k, ref.gk, tol, "grad k, " + what);
        expect_near(grads.v, ref.gv, tol, "grad v, " + what);
      }
    }
  }
}

TEST(CausalAttentionBlock, AHiddenBlockGivesZeroAndMinusInfinityWithoutNaN) {
  const auto qp = AttentionPositions::contiguous(0, 6), kp = AttentionPositions::contiguous(6, 5);
  const Tensor q = seeded_normal({1, 2, 6, 4}, kF32, 1), k = seeded_normal({1, 2, 5, 4}, kF32, 2),
               v = seeded_normal({1, 2, 5, 4}, kF32, 3), g = seeded_normal({1, 2, 6, 4}, kF32, 4);
  const auto r = causal_attention_block(q, k, v, 0.5, qp, kp, {2, 2});
  EXPECT_EQ(max_abs_diff(r.output, zeros_like(r.output)), 0.0);
  for (const float x : r.logsumexp.to_vector<float>()) EXPECT_EQ(x, -kInf);
  // Backward with a whole attention's finite O and L elsewhere: this block adds nothing.
  const Tensor out_all = seeded_normal({1, 2, 6, 4}, kF32, 5), lse_all = seeded_normal({1, 2, 6}, kF32, 6);
  const auto grads =
      causal_attention_block_backward(g, q, k, v, out_all, lse_all, 0.5, qp, kp, {2, 2});
  EXPECT_EQ(max_abs_diff(grads.q, zeros_like(grads.q)), 0.0);
  EXPECT_EQ(max_abs_diff(grads.k, zeros_like(grads.k)), 0.0);
  EXPECT_EQ(max_abs_diff(grads.v, zeros_like(grads.v)), 0.0);
  // And combining it with a visible block leaves that block's result exactly.
  const auto seen = causal_attention_block(q, k, v, 0.5, AttentionPositions::contiguous(9, 6), kp);
  const auto both = combine_attention(r, seen);
  EXPECT_EQ(max_abs_diff(both.output, seen.output), 0.0);
  EXPECT_EQ(max_abs_diff(both.logsumexp, seen.logsumexp), 0.0);
  const auto none = combine_attention(r, r);
  EXPECT_EQ(max_abs_diff(none.output, zeros_like(none.output)), 0.0);
  for (const float x : none.logsumexp.to_vector<float>()) EXPECT_EQ(x, -kInf);
}

// Head-tail chunks: T = 2C L, rank i holds chunks i and 2C-1-i. For each rank's queries the
// blocks of every rank's keys, combined, are the causal attention's rows; the gradients summed
// over blocks (dQ per query owner, dK and dV per key owner) are its gradients.
TEST(CausalAttentionBlock, HeadTailBlocksCombineToCausalAttention) {
  for (const DType dtype : {kF32, kF64}) {
    const double tol = dtype == kF32 ? 1e-5 : 1e-12;
    for (const int64_t c : {2, 3}) {
      const int64_t chunk = 5, t = 2 * c * chunk, d = 4;
      const Tensor q = seeded_normal({2, 2, t, d}, dtype, 10 + c), k = seeded_normal({2, 2, t, d}, dtype, 20 + c),
                   v = seeded_normal({2, 2, t, d}, dtype, 30 + c), g = seeded_normal({2, 2, t, d}, dtype, 40 + c);
      const auto ref = reference_attention(q, k, v, 0.5, g);
      std::vector<AttentionPositions> pos;
      std::vector<Tensor> rows;  // each rank's rows of a [.., T, D] tensor, as an index
      for (int64_t i = 0; i < c; ++i) {
        const int64_t head = i * chunk, tail = (2 * c - 1 - i) * chunk;
        pos.push_back(AttentionPositions{{{head, chunk}, {tail, chunk}}});
        rows.push_back(from_vector<int64_t>(pos.back().expand(), {2 * chunk}));
      }
      auto take = [&](const Tensor& x, int64_t i) { return index_select(x, 2, rows[i]); };
      std::vector<Tensor> gk(c), gv(c);
      for (int64_t i = 0; i < c; ++i) {
        gk[i] = zeros({2, 2, 2 * chunk, d}, kF64);
        gv[i] = zeros({2, 2, 2 * chunk, d}, kF64);
      }
      for (int64_t i = 0; i < c; ++i) {
        CausalAttentionResult all;
        for (int64_t j = 0; j < c; ++j) {
          const auto part = causal_attention_block(take(q, i), take(k, j), take(v, j), 0.5, pos[i],
                                                   pos[j], {3, 4});
          all = j == 0 ? part : combine_attention(all, part);
        }
        expect_near(all.output, take(ref.output, i), tol, "output of rank " + std::to_string(i));
        expect_near(all.logsumexp, index_select(ref.logsumexp, 2, rows[i]), tol, "logsumexp");
        Tensor gq = zeros({2, 2, 2 * chunk, d}, kF64);
        for (int64_t j = 0; j < c; ++j) {
          const auto grads = causal_attention_block_backward(take(g, i), take(q, i), take(k, j),
                                                             take(v, j), all.output, all.logsumexp,
                                                             0.5, pos[i], pos[j], {3, 4});
          add_(gq, grads.q.to(kF64));
          add_(gk[j], grads.k.to(kF64));
          add_(gv[j], grads.v.to(kF64));
        }
        expect_near(gq, take(ref.grad_q, i), tol, "grad q of rank " + std::to_string(i));
      }
      for (int64_t j = 0; j < c; ++j) {
        expect_near(gk[j], take(ref.grad_k, j), tol, "grad k of rank " + std::to_string(j));
        expect_near(gv[j], take(ref.grad_v, j), tol, "grad v of rank " + std::to_string(j));
      }
    }
  }
}

TEST(CausalAttentionBlock, ErrorsNameWhatIsWrong) {
  const Tensor q = seeded_normal({1, 2, 5, 4}, kF32, 1), k = seeded_normal({1, 2, 6, 4}, kF32, 2);
  const auto five = AttentionPositions::contiguous(0, 5),
             six = AttentionPositions::contiguous(0, 6);
  expect_error([&] { causal_attention_block(q, k, k, 1.0, six, six); },
               "causal_attention_block: query positions cover 6 rows, but the tensor has 5");
  expect_error(
      [&] {
        causal_attention_block(q, k, k, 1.0, five, AttentionPositions{{{-1, 6}}});
      },
      "key positions need runs of start >= 0 and length >= 0, got a run {start = -1");
  expect_error(
      [&] {
        causal_attention_block(q, seeded_normal({1, 2, 6, 3}, kF32, 3), k, 1.0, five, six);
      },
      "must agree in B, H and D, got q [1, 2, 5, 4], k [1, 2, 6, 3]");
  const CausalAttentionResult a{zeros({1, 2, 5, 4}), zeros({1, 2, 5})};
  const CausalAttentionResult b{zeros({1, 2, 6, 4}), zeros({1, 2, 6})};
  expect_error([&] { combine_attention(a, b); },
               "combine_attention: the two blocks' results must have one shape");
}

}  // namespace
}  // namespace tessera
