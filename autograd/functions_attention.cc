// Differentiable causal self-attention: the blocked op of tensor/ops.h (FlashAttention's
// algorithm) on Variables, on q, k, v [B, H, T, D], and as GPT-2's block uses it, on the QKV
// projection's output [B, T, 3C].
//
// Each op is one node whose backward saves q, k, v, the output and the per-row logsumexp
// ([B, H, T]): the probabilities are recomputed block by block in backward, never stored.
#include <algorithm>
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "tensor/ops.h"

namespace tessera {

namespace {

double default_scale(int64_t head_dim) {
  return 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(head_dim, 1)));
}

}  // namespace

Variable causal_attention(const Variable& q_in, const Variable& k_in, const Variable& v_in,
                          double scale, const AttentionBlocks& blocks) {
  const auto in = autocast_args("causal_attention", q_in, k_in, v_in);
  const Variable &q = in[0], &k = in[1], &v = in[2];
  const CausalAttentionResult r = causal_attention(q.data(), k.data(), v.data(), scale, blocks);
  return record("CausalAttentionBackward", r.output, {q, k, v},
                [q = q.data(), k = k.data(), v = v.data(), r, scale, blocks](const Tensor& g) {
                  const CausalAttentionGrads grads =
                      causal_attention_backward(g, q, k, v, r.output, r.logsumexp, scale, blocks);
                  return Grads{grads.q, grads.k, grads.v};
                });
}

Variable causal_attention(const Variable& q_in, const Variable& k_in, const Variable& v_in,
                          double scale, const AttentionPositions& q_positions,
                          const AttentionPositions& k_positions, const AttentionBlocks& blocks) {
  const auto in = autocast_args("causal_attention", q_in, k_in, v_in);
  const Variable &q = in[0], &k = in[1], &v = in[2];
  const CausalAttentionResult r =
      causal_attention_block(q.data(), k.data(), v.data(), scale, q_positions, k_positions, blocks);
  return record("CausalAttentionBackward", r.output.to(q.dtype()), {q, k, v},
                [q = q.data(), k = k.data(), v = v.data(), r, scale, q_positions, k_positions,
                 blocks](const Tensor& g) {
                  const CausalAttentionGrads grads = causal_attention_block_backward(
                      g, q, k, v, r.output, r.logsumexp, scale, q_positions, k_positions, blocks);
                  return Grads{grads.q, grads.k, grads.v};
                });
}

Variable causal_attention(const Variable& q, const Variable& k, const Variable& v) {
  TS_CHECK(q.dim() == 4, "causal_attention: expected q of shape [B, H, T, D], got shape ",
           q.shape());
  return causal_attention(q, k, v, default_scale(q.size(3)));
}

// qkv [B, T, 3C] holds q | k | v along its last dim, each C = H D wide with head h at columns
// [h D, (h + 1) D): viewed as [B, T, 3, H, D] and permuted to [3, B, H, T, D], one copy gives
// the kernels' three contiguous operands. The output [B, H, T, D] goes back as [B, T, H D],
// and the gradients the same ways in reverse.
Variable causal_self_attention(const Variable& qkv_in, int64_t n_head,
                               const AttentionBlocks& blocks) {
  const char* op = "causal_self_attention";
  const Variable qkv = autocast_args(op, qkv_in)[0];
  TS_CHECK(qkv.dim() == 3, op, ": expected qkv of shape [B, T, 3C], got shape ", qkv.shape());
  TS_CHECK(n_head > 0, op, ": n_head must be positive, got ", n_head);
  const int64_t b = qkv.size(0), t = qkv.size(1), c3 = qkv.size(2);
  TS_CHECK(c3 % (3 * n_head) == 0, op, ": the last dim of qkv ", qkv.shape(),
           " must be 3 x n_head x head_dim, and ", c3, " is not a multiple of 3 x ", n_head);
  const int64_t c = c3 / 3, d = c / n_head;
  const double scale = default_scale(d);
  const Tensor heads = qkv.data().view({b, t, 3, n_head, d}).permute({2, 0, 3, 1, 4}).contiguous();
  const Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
  const CausalAttentionResult r = causal_attention(q, k, v, scale, blocks);
  const Tensor y = r.output.permute({0, 2, 1, 3}).contiguous().view({b, t, c});
  return record("CausalSelfAttentionBackward", y, {qkv},
                [q, k, v, r, scale, blocks, b, t, c, n_head, d](const Tensor& g) {
                  const Tensor g_heads = g.reshape({b, t, n_head, d}).permute({0, 2, 1, 3});
                  const CausalAttentionGrads grads = causal_attention_backward(
                      g_heads, q, k, v, r.output, r.logsumexp, scale, blocks);
                  const Tensor packed = stack(std::vector<Tensor>{grads.q, grads.k, grads.v}, 0);  // [3, B, H, T, D]
                  return Grads{packed.permute({1, 3, 0, 2, 4}).contiguous().view({b, t, 3 * c})};
                });
}

}  // namespace tessera
