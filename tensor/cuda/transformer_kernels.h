// Launchers of the transformer layers' CUDA kernels (layer_norm.cu, gelu.cu, embedding.cu),
// as kernels.h declares the others': each enqueues on `stream` and returns without waiting;
// tensor/ops_transformer.cc checked the shapes, dtypes and indices. Floating inputs are f32,
// f64, f16 or bf16, computed in f32 (f64 for f64), like their CPU twins in tensor/cpu/.
#pragma once

#include "tensor/cuda/kernel_args.h"

namespace tessera {
namespace cuda {

// layer_norm.cu: x [rows, n]; weight, bias, mean, rstd, grad_weight and grad_bias in the
// compute type; grad_in, grad_weight and grad_bias may be null. The backward's workspace:
// layer_norm_workspace_size(rows, n) values of the compute type, in device memory.
void launch_layer_norm(const void* x, const void* weight, const void* bias, double eps, void* out,
                       void* mean, void* rstd, DType dtype, int64_t rows, int64_t n,
                       cudaStream_t stream);
int64_t layer_norm_workspace_size(int64_t rows, int64_t n);
void launch_layer_norm_backward(const void* grad_out, const void* x, const void* mean,
                                const void* rstd, const void* weight, void* grad_in,
                                void* grad_weight, void* grad_bias, void* workspace, DType dtype,
                                int64_t rows, int64_t n, cudaStream_t stream);

// gelu.cu: numel contiguous values.
void launch_gelu(const void* in, void* out, GeluApproximate approximate, DType dtype,
                 int64_t numel, cudaStream_t stream);
void launch_gelu_backward(const void* grad_out, const void* in, void* grad_in,
                          GeluApproximate approximate, DType dtype, int64_t numel,
                          cudaStream_t stream);

// embedding.cu: grad_weight [v, c] (compute type) += the rows of grad_out [n, c] at index [n].
void launch_embedding_backward(const void* grad_out, const int64_t* index, void* grad_weight,
                               DType dtype, int64_t n, int64_t c, int64_t v,
                               cudaStream_t stream);

}  // namespace cuda
}  // namespace tessera
