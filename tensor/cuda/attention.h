// Causal attention's CUDA launchers (attention.cu), for the backend (attention_backend.cc).
// Operands are contiguous [heads, t, d] (heads = B x H) of `dtype` (f32 or f64); logsumexp and
// delta are [heads, t]. Each enqueues its kernels on `s` and returns without waiting.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/kinds.h"

namespace tessera {
namespace cuda {

void launch_causal_attention(const void* q, const void* k, const void* v, void* out, void* lse,
                             DType dtype, int64_t heads, int64_t t, int64_t d, double scale,
                             cudaStream_t s);
// delta: [heads, t] scratch (the rows' sum of dO * O).
void launch_causal_attention_backward(const void* grad_out, const void* q, const void* k,
                                      const void* v, const void* out, const void* lse,
                                      void* delta, void* grad_q, void* grad_k, void* grad_v,
                                      DType dtype, int64_t heads, int64_t t, int64_t d,
                                      double scale, cudaStream_t s);

}  // namespace cuda
}  // namespace tessera
