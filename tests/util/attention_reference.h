// Causal attention the plain way, as the tests' reference for the blocked op
// (tensor/ops.h's causal_attention): per (batch, head), the whole T x T matrix of scores is
// materialized, in f64, and the softmax and its backward are the textbook formulas
// (llm.c's attention_forward/backward, without the fusing):
//
//   S = scale Q K^T, S[t][s] = -inf for s > t,  P = softmax_rows(S),  O = P V
//   dV = P^T dO,  dP = dO V^T,  dS[t][s] = P[t][s] (dP[t][s] - sum_u P[t][u] dP[t][u]),
//   dQ = scale dS K,  dK = scale dS^T Q
//
// Memory O(T^2) per head and time O(T^2 D) in scalar loops: for small shapes only.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/ops.h"

namespace tessera {
namespace testing {

struct ReferenceAttention {
  Tensor output;     // [B, H, T, D], f64
  Tensor logsumexp;  // [B, H, T], f64
  Tensor grad_q, grad_k, grad_v;  // f64; defined when a grad_out was given
};

// q, k, v [B, H, T, D] of any floating dtype (read as f64); grad_out may be undefined.
inline ReferenceAttention reference_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                              double scale, const Tensor& grad_out = Tensor()) {
  const int64_t heads = q.size(0) * q.size(1), t = q.size(2), d = q.size(3);
  const std::vector<double> qs = q.contiguous().to_vector<double>();
  const std::vector<double> ks = k.contiguous().to_vector<double>();
  const std::vector<double> vs = v.contiguous().to_vector<double>();
  const bool backward = grad_out.defined();
  const std::vector<double> gs =
      backward ? grad_out.contiguous().to_vector<double>() : std::vector<double>();
  std::vector<double> out(qs.size()), lse(heads * t), dq(qs.size()), dk(qs.size()),
      dv(qs.size());
  std::vector<double> p(t * t), dp(t * t);
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t base = h * t * d;
    for (int64_t i = 0; i < t; ++i) {
      double m = -INFINITY;
      for (int64_t j = 0; j < t; ++j) {
        double s = -INFINITY;
        if (j <= i) {
          s = 0;
          for (int64_t c = 0; c < d; ++c) s += qs[base + i * d + c] * ks[base + j * d + c];
          s *= scale;
        }
        p[i * t + j] = s;
        m = std::max(m, s);
      }
      double total = 0;
      for (int64_t j = 0; j < t; ++j) total += std::exp(p[i * t + j] - m);
      for (int64_t j = 0; j < t; ++j) p[i * t + j] = std::exp(p[i * t + j] - m) / total;
      lse[h * t + i] = m + std::log(total);
      for (int64_t c = 0; c < d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < t; ++j) o += p[i * t + j] * vs[base + j * d + c];
        out[base + i * d + c] = o;
      }
    }
    if (!backward) continue;
    for (int64_t i = 0; i < t; ++i) {
      double row = 0;  // sum_u P[i][u] dP[i][u]
      for (int64_t j = 0; j < t; ++j) {
        double g = 0;
        for (int64_t c = 0; c < d; ++c) g += gs[base + i * d + c] * vs[base + j * d + c];
        dp[i * t + j] = g;
        row += p[i * t + j] * g;
      }
      for (int64_t j = 0; j < t; ++j) dp[i * t + j] = p[i * t + j] * (dp[i * t + j] - row);
    }
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t c = 0; c < d; ++c) {
        double gq = 0, gk = 0, gv = 0;
        for (int64_t j = 0; j < t; ++j) {
          gq += dp[i * t + j] * ks[base + j * d + c];
          gk += dp[j * t + i] * qs[base + j * d + c];
          gv += p[j * t + i] * gs[base + j * d + c];
        }
        dq[base + i * d + c] = scale * gq;
        dk[base + i * d + c] = scale * gk;
        dv[base + i * d + c] = gv;
      }
    }
  }
  ReferenceAttention r;
  r.output = from_vector<double>(out, q.shape());
  r.logsumexp = from_vector<double>(lse, {q.size(0), q.size(1), t});
  if (backward) {
    r.grad_q = from_vector<double>(dq, q.shape());
    r.grad_k = from_vector<double>(dk, q.shape());
    r.grad_v = from_vector<double>(dv, q.shape());
  }
  return r;
}

}  // namespace testing
}  // namespace tessera
