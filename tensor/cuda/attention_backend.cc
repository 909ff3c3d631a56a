// CudaBackend: causal attention (the kernels are attention.cu). The blocks the CPU is tiled by
// do not apply: the kernels size their tiles by the head dimension and shared memory.
#include "tensor/cuda/attention.h"
#include "tensor/cuda/cuda_backend.h"

namespace tessera {
namespace cuda {

void CudaBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& q_positions, const Tensor& k_positions,
                                   double scale, const AttentionBlocks& /*blocks*/,
                                   const Tensor& out, const Tensor& logsumexp) {
  if (q.numel() == 0 || k.numel() == 0) return;
  OnDevice on(q);
  launch_causal_attention(q.raw_data(), k.raw_data(), v.raw_data(), q_positions.data<int64_t>(),
                          k_positions.data<int64_t>(), out.raw_data(), logsumexp.raw_data(),
                          q.dtype(), q.size(0) * q.size(1), q.size(2), k.size(2), q.size(3),
                          scale, on.stream);
}

void CudaBackend::causal_attention_backward(const Tensor& grad_out, const Tensor& q,
                                            const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& logsumexp, const Tensor& q_positions,
                                            const Tensor& k_positions, double scale,
                                            const AttentionBlocks& /*blocks*/,
                                            const Tensor& grad_q, const Tensor& grad_k,
                                            const Tensor& grad_v) {
  if (q.numel() == 0 || k.numel() == 0) return;
  OnDevice on(q);
  // D = rowsum(dO * O), one value per query row; freed (to the caching allocator, stream-ordered)
  // when this call returns.
  const Tensor delta = empty({q.size(0), q.size(1), q.size(2)}, q.options());
  launch_causal_attention_backward(
      grad_out.raw_data(), q.raw_data(), k.raw_data(), v.raw_data(), q_positions.data<int64_t>(),
      k_positions.data<int64_t>(), out.raw_data(), logsumexp.raw_data(), delta.raw_data(),
      grad_q.raw_data(), grad_k.raw_data(), grad_v.raw_data(), q.dtype(), q.size(0) * q.size(1),
      q.size(2), k.size(2), q.size(3), scale, on.stream);
}

}  // namespace cuda
}  // namespace tessera
