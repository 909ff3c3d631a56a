// Causal attention's front end: checks q, k, v (and the backward's tensors), brings them to the
// kernels' contiguous [B, H, T, D] in f32 or f64, and hands them to the device's backend
// (tensor/cpu/attention.cc, tensor/cuda/attention.cu explain the algorithm).
#include <cmath>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

// The kernels' dtype: f64 stays f64; f32, f16 and bf16 compute in f32.
DType compute_dtype(DType dtype) { return dtype == kF64 ? kF64 : kF32; }

Tensor prepared(const Tensor& t) { return t.to(compute_dtype(t.dtype())).contiguous(); }

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
               const AttentionBlocks& blocks, const char* op) {
  detail::check_defined(q, op, "q");
  detail::check_defined(k, op, "k");
  detail::check_defined(v, op, "v");
  TS_CHECK(q.dim() == 4, op, ": expected q of shape [B, H, T, D], got shape ", q.shape());
  TS_CHECK(k.shape() == q.shape() && v.shape() == q.shape(), op,
           ": q, k and v must have one shape [B, H, T, D], got q ", q.shape(), ", k ", k.shape(),
           ", v ", v.shape());
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

}  // namespace

CausalAttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       double scale, const AttentionBlocks& blocks) {
  check_qkv(q, k, v, scale, blocks, "causal_attention");
  const Tensor qc = prepared(q), kc = prepared(k), vc = prepared(v);
  Tensor out = empty(q.shape(), qc.options());
  Tensor lse = empty({q.size(0), q.size(1), q.size(2)}, qc.options());
  backend(q.device()).causal_attention(qc, kc, vc, scale, blocks, out, lse);
  return {out.to(q.dtype()), lse};
}

CausalAttentionGrads causal_attention_backward(const Tensor& grad_out, const Tensor& q,
                                               const Tensor& k, const Tensor& v,
                                               const Tensor& output, const Tensor& logsumexp,
                                               double scale, const AttentionBlocks& blocks) {
  const char* op = "causal_attention_backward";
  check_qkv(q, k, v, scale, blocks, op);
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
  const Tensor qc = prepared(q), kc = prepared(k), vc = prepared(v);
  const DType ct = qc.dtype();
  const Tensor gc = grad_out.to(ct).contiguous(), oc = output.to(ct).contiguous();
  const Tensor lc = logsumexp.to(ct).contiguous();
  Tensor gq = empty(q.shape(), qc.options()), gk = empty(q.shape(), qc.options()),
         gv = empty(q.shape(), qc.options());
  backend(q.device()).causal_attention_backward(gc, qc, kc, vc, oc, lc, scale, blocks, gq, gk,
                                                gv);
  return {gq.to(q.dtype()), gk.to(k.dtype()), gv.to(v.dtype())};
}

}  // namespace tessera
