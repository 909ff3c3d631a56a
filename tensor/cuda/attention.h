// Causal attention's CUDA launchers (attention.cu), for the backend (attention_backend.cc).
// q, out, grad_out, grad_q are contiguous [heads, tq, d] (heads = B x H), k, v, grad_k, grad_v
// [heads, tk, d], of `dtype` (f32 or f64); logsumexp and delta are [heads, tq]; qpos [tq] and
// kpos [tk] the rows' absolute positions (device memory), query r seeing key c when
// kpos[c] <= qpos[r]. Each enqueues its kernels on `s` and returns without waiting.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/kinds.h"

namespace tessera {
namespace cuda {

void launch_causal_attention(const void* q, const void* k, const void* v, const int64_t* qpos,
                             const int64_t* kpos, void* out, void* lse, DType dtype,
                             int64_t heads, int64_t tq, int64_t tk, int64_t d, double scale,
                             cudaStream_t s);
// delta: [heads, tq] scratch (the rows' sum of dO * O).
void launch_causal_attention_backward(const void* grad_out, const void* q, const void* k,
                                      const void* v, const int64_t* qpos, const int64_t* kpos,
                                      const void* out, const void* lse, void* delta,
                                      void* grad_q, void* grad_k, void* grad_v, DType dtype,
                                      int64_t heads, int64_t tq, int64_t tk, int64_t d,
                                      double scale, cudaStream_t s);

}  // namespace cuda
}  // namespace tessera
