// Causal attention's front end: checks q, k, v (and the backward's tensors), brings them to the
// kernels' contiguous [B, H, T, D] in f32 or f64 with the rows' absolute positions as i64
// vectors on the device, and hands them to the device's backend (tensor/cpu/attention.cc,
// tensor/cuda/attention.cu explain the algorithm). Plain causal attention is the one-block case
// of causal_attention_block, positions 0..T-1 for queries and keys alike; combine_attention is
// the online softmax's rescaling on whole blocks, written with tensor ops so that it runs on
// any device.
#include <cmath>
#include <limits>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

// The kernels' dtype: f64 stays f64; f32, f16 and bf16 compute in f32.
DType compute_dtype(DType dtype) { return dtype == kF64 ? kF64 : kF32; }

Tensor prepared(const Tensor& t) { return t.to(compute_dtype(t.dtype())).contiguous(); }

// q [B, H, Tq, D]; k, v [B, H, Tk, D], with Tk = Tq when `one_length`.
void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
               const AttentionBlocks& blocks, const char* op, bool one_length) {
  detail::check_defined(q, op, "q");
  detail::check_defined(k, op, "k");
  detail::check_defined(v, op, "v");
  TS_CHECK(q.dim() == 4, op, ": expected q of shape [B, H, T, D], got shape ", q.shape());
  TS_CHECK(!one_length || (k.shape() == q.shape() && v.shape() == q.shape()), op,
           ": q, k and v must have one shape [B, H, T, D], got q ", q.shape(), ", k ", k.shape(),
           ", v ", v.shape());
  TS_CHECK(k.dim() == 4 && k.size(0) == q.size(0) && k.size(1) == q.size(1) &&
               k.size(3) == q.size(3) && v.shape() == k.shape(),
           op, ": q [B, H, Tq, D] and k, v [B, H, Tk, D] must agree in B, H and D, got q ",
           q.shape(), ", k ", k.shape(), ", v ", v.shape());
  TS_CHECK(q.size(3) > 0, op, ": the head dimension D of q ", q.shape(), " must be positive");
  detail::check_floating(q, op);
  TS_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op,
           ": q, k and v must have one dtype, got ", q.dtype(), ", ", k.dtype(), ", ",
           v.dtype());
  detail::check_same_device(q, k, op);
  detail::check_same_device(q, v, op);
  TS_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  TS_CHECK(blocks.query > 0 && blocks.key > 0, op,
           ": blocks must hold at least one query and one key, got query = ", blocks.query,
           ", key = ", blocks.key);
}

// The rows' positions as the kernels read them: i64 [rows] on `device`.
Tensor position_tensor(const AttentionPositions& positions, int64_t rows, const Device& device,
                       const char* op, const char* what) {
  for (const AttentionPositions::Run& run : positions.runs) {
    TS_CHECK(run.start >= 0 && run.length >= 0, op, ": ", what,
             " positions need runs of start >= 0 and length >= 0, got a run {start = ",
             run.start, ", length = ", run.length, "}");
  }
  TS_CHECK(positions.rows() == rows, op, ": ", what, " positions cover ", positions.rows(),
           " rows, but the tensor has ", rows, " along T");
  return from_vector<int64_t>(positions.expand(), {rows}).to(device);
}

void check_backward_tensors(const Tensor& grad_out, const Tensor& q, const Tensor& output,
                            const Tensor& logsumexp, const char* op) {
  detail::check_defined(grad_out, op, "grad");
  detail::check_defined(output, op, "output");
  detail::check_defined(logsumexp, op, "logsumexp");
  TS_CHECK(grad_out.shape() == q.shape() && output.shape() == q.shape(), op,
           ": grad and output must have q's shape ", q.shape(), ", got grad ", grad_out.shape(),
           ", output ", output.shape());
  const Shape rows{q.size(0), q.size(1), q.size(2)};
  TS_CHECK(logsumexp.shape() == rows, op, ": logsumexp must have shape ", rows, ", got ",
           logsumexp.shape());
  detail::check_same_device(q, grad_out, op);
  detail::check_same_device(q, output, op);
  detail::check_same_device(q, logsumexp, op);
}

// Forward on checked inputs; the output in the kernels' dtype.
CausalAttentionResult forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                              const Tensor& q_pos, const Tensor& k_pos,
                              const AttentionBlocks& blocks) {
  const Tensor qc = prepared(q), kc = prepared(k), vc = prepared(v);
  Tensor out = zeros(q.shape(), qc.options());
  Tensor lse = full({q.size(0), q.size(1), q.size(2)}, -std::numeric_limits<double>::infinity(),
                    qc.options());
  backend(q.device()).causal_attention(qc, kc, vc, q_pos, k_pos, scale, blocks, out, lse);
  return {out, lse};
}

CausalAttentionGrads backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& output, const Tensor& logsumexp,
                              double scale, const Tensor& q_pos, const Tensor& k_pos,
                              const AttentionBlocks& blocks) {
  const Tensor qc = prepared(q), kc = prepared(k), vc = prepared(v);
  const DType ct = qc.dtype();
  const Tensor gc = grad_out.to(ct).contiguous(), oc = output.to(ct).contiguous();
  const Tensor lc = logsumexp.to(ct).contiguous();
  Tensor gq = zeros(q.shape(), qc.options()), gk = zeros(k.shape(), qc.options()),
         gv = zeros(k.shape(), qc.options());
  backend(q.device()).causal_attention_backward(gc, qc, kc, vc, oc, lc, q_pos, k_pos, scale,
                                                blocks, gq, gk, gv);
  return {gq.to(q.dtype()), gk.to(k.dtype()), gv.to(v.dtype())};
}

}  // namespace

CausalAttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       double scale, const AttentionBlocks& blocks) {
  const char* op = "causal_attention";
  check_qkv(q, k, v, scale, blocks, op, true);
  const Tensor pos = position_tensor(AttentionPositions::contiguous(0, q.size(2)), q.size(2),
                                     q.device(), op, "query");
  const CausalAttentionResult r = forward(q, k, v, scale, pos, pos, blocks);
  return {r.output.to(q.dtype()), r.logsumexp};
}

CausalAttentionGrads causal_attention_backward(const Tensor& grad_out, const Tensor& q,
                                               const Tensor& k, const Tensor& v,
                                               const Tensor& output, const Tensor& logsumexp,
                                               double scale, const AttentionBlocks& blocks) {
  const char* op = "causal_attention_backward";
  check_qkv(q, k, v, scale, blocks, op, true);
  check_backward_tensors(grad_out, q, output, logsumexp, op);
  const Tensor pos = position_tensor(AttentionPositions::contiguous(0, q.size(2)), q.size(2),
                                     q.device(), op, "query");
  return backward(grad_out, q, k, v, output, logsumexp, scale, pos, pos, blocks);
}

CausalAttentionResult causal_attention_block(const Tensor& q, const Tensor& k, const Tensor& v,
                                             double scale, const AttentionPositions& q_positions,
                                             const AttentionPositions& k_positions,
                                             const AttentionBlocks& blocks) {
  const char* op = "causal_attention_block";
  check_qkv(q, k, v, scale, blocks, op, false);
  const Tensor q_pos = position_tensor(q_positions, q.size(2), q.device(), op, "query");
  const Tensor k_pos = position_tensor(k_positions, k.size(2), q.device(), op, "key");
  return forward(q, k, v, scale, q_pos, k_pos, blocks);
}

CausalAttentionResult combine_attention(const CausalAttentionResult& a,
                                        const CausalAttentionResult& b) {
  const char* op = "combine_attention";
  TS_CHECK(a.output.shape() == b.output.shape() && a.logsumexp.shape() == b.logsumexp.shape(),
           op, ": the two blocks' results must have one shape, got outputs ", a.output.shape(),
           " and ", b.output.shape(), ", logsumexps ", a.logsumexp.shape(), " and ",
           b.logsumexp.shape());
  TS_CHECK(a.output.dim() == a.logsumexp.dim() + 1, op, ": expected output [..., T, D] and ",
           "logsumexp [..., T], got ", a.output.shape(), " and ", a.logsumexp.shape());
  const double inf = std::numeric_limits<double>::infinity();
  // Shift by the larger logsumexp (0 where both are -inf, so that no -inf - -inf appears).
  const Tensor m = maximum(a.logsumexp, b.logsumexp);
  const Tensor zero = scalar_tensor(0.0, m.options());
  const Tensor shift = where(eq(m, -inf), zero, m);
  const Tensor wa = exp(a.logsumexp - shift), wb = exp(b.logsumexp - shift);
  const Tensor total = wa + wb;
  const Tensor lse = shift + log(total);  // log 0 = -inf where both are
  const Tensor safe = where(eq(total, 0.0), scalar_tensor(1.0, m.options()), total);
  const Tensor out = a.output * (wa / safe).unsqueeze(-1) + b.output * (wb / safe).unsqueeze(-1);
  return {out, lse};
}

CausalAttentionGrads causal_attention_block_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& output, const Tensor& logsumexp, double scale,
    const AttentionPositions& q_positions, const AttentionPositions& k_positions,
    const AttentionBlocks& blocks) {
  const char* op = "causal_attention_block_backward";
  check_qkv(q, k, v, scale, blocks, op, false);
  check_backward_tensors(grad_out, q, output, logsumexp, op);
  const Tensor q_pos = position_tensor(q_positions, q.size(2), q.device(), op, "query");
  const Tensor k_pos = position_tensor(k_positions, k.size(2), q.device(), op, "key");
  return backward(grad_out, q, k, v, output, logsumexp, scale, q_pos, k_pos, blocks);
}

}  // namespace tessera
