// The CUDA kernels' launchers (defined in the .cu files of this folder). Each enqueues its work
// on `stream` and returns without waiting; shapes and dtypes were checked by tensor/ops.cc and
// the backend, so the launchers only compute. Floating kernels accept f32, f64, f16 and bf16
// (computed in f32, or f64 for f64), like the CPU kernels.
#pragma once

#include "tensor/cuda/kernel_args.h"

namespace tessera {
namespace cuda {

// elementwise.cu: every output element from the inputs at the same multi-index.
void launch_copy(const TensorArg& src, const TensorArg& dst, int64_t numel, cudaStream_t s);
void launch_fill(const TensorArg& dst, double value, int64_t numel, cudaStream_t s);
void launch_unary(UnaryOp op, const TensorArg& in, const TensorArg& out, double alpha,
                  double beta, int64_t numel, cudaStream_t s);
void launch_binary(BinaryOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out,
                   int64_t numel, cudaStream_t s);
void launch_where(const TensorArg& cond, const TensorArg& a, const TensorArg& b,
                  const TensorArg& out, int64_t numel, cudaStream_t s);

// reduce.cu: rows of a contiguous [outer, inner] tensor; softmax over the last dim.
void launch_reduce(ReduceOp op, const void* in, DType in_dtype, void* out, DType out_dtype,
                   int64_t outer, int64_t inner, int64_t correction, cudaStream_t s);
void launch_softmax(const void* in, void* out, DType dtype, int64_t rows, int64_t n, bool log,
                    cudaStream_t s);
void launch_softmax_backward(const void* grad_out, const void* out, void* grad_in, DType dtype,
                             int64_t rows, int64_t n, bool log, cudaStream_t s);

// Fused cross-entropy on [rows, n] (reduce.cu): log_probs and per-row loss, and the backward.
void launch_cross_entropy(const void* logits, const int64_t* target, double label_smoothing,
                          void* log_probs, void* loss, DType dtype, int64_t rows, int64_t n,
                          cudaStream_t s);
void launch_cross_entropy_backward(const void* log_probs, const int64_t* target,
                                   const void* row_grad, double label_smoothing,
                                   void* grad_logits, DType dtype, int64_t rows, int64_t n,
                                   cudaStream_t s);

// index.cu (index tensors are contiguous i64, already checked in range).
// in: [outer, n_in, inner] -> out: [outer, n_index, inner].
void launch_index_select(const void* in, void* out, const int64_t* index, int64_t outer,
                         int64_t n_in, int64_t n_index, int64_t inner, int64_t element_size,
                         cudaStream_t s);
// out[p] = in[p with coordinate `dim` replaced by index[p]]; `index` has out's shape (as arg),
// `other` describes in (gather) or self (scatter_add) as a contiguous shape.
void launch_gather(const void* in, void* out, const int64_t* index, const TensorArg& index_shape,
                   const TensorArg& other_shape, int dim, DType dtype, int64_t numel,
                   cudaStream_t s);
void launch_scatter_add(void* self, const void* src, const int64_t* index,
                        const TensorArg& index_shape, const TensorArg& other_shape, int dim,
                        DType dtype, int64_t numel, cudaStream_t s);

// pool.cu: NCHW planes. max_pool2d_backward adds into a zeroed grad_in and needs only the
// plane sizes of p.
void launch_max_pool2d(const void* in, void* out, int64_t* indices, const PoolArgs& p,
                       DType dtype, cudaStream_t s);
void launch_max_pool2d_backward(const void* grad_out, const int64_t* indices, void* grad_in,
                                const PoolArgs& p, DType dtype, cudaStream_t s);
void launch_avg_pool2d(const void* in, void* out, const PoolArgs& p, DType dtype,
                       cudaStream_t s);
void launch_avg_pool2d_backward(const void* grad_out, void* grad_in, const PoolArgs& p,
                                DType dtype, cudaStream_t s);
void launch_adaptive_avg_pool2d(const void* in, void* out, const PoolArgs& p, DType dtype,
                                cudaStream_t s);
void launch_adaptive_avg_pool2d_backward(const void* grad_out, void* grad_in, const PoolArgs& p,
                                         DType dtype, cudaStream_t s);

// batch_norm.cu: x is [n, c, s]; per-channel tensors in f32 (f64 for f64 inputs);
// weight/bias/grad_* may be null.
void launch_batch_norm_stats(const void* x, void* mean, void* var, DType dtype, int64_t n,
                             int64_t c, int64_t s, cudaStream_t stream);
void launch_batch_norm_apply(const void* x, const void* mean, const void* invstd,
                             const void* weight, const void* bias, void* out, DType dtype,
                             int64_t n, int64_t c, int64_t s, cudaStream_t stream);
// workspace: 2 * c doubles of device memory.
void launch_batch_norm_backward(const void* grad_out, const void* x, const void* mean,
                                const void* invstd, const void* weight, bool training,
                                void* grad_in, void* grad_weight, void* grad_bias,
                                double* workspace, DType dtype, int64_t n, int64_t c, int64_t s,
                                cudaStream_t stream);

// optim.cu: fused updates over `numel` contiguous elements.
void launch_sgd_update(void* param, const void* grad, void* momentum_buffer, DType dtype,
                       int64_t numel, const SgdUpdate& u, cudaStream_t s);
void launch_adam_update(void* param, const void* grad, void* exp_avg, void* exp_avg_sq,
                        void* max_exp_avg_sq, DType dtype, int64_t numel, const AdamUpdate& u,
                        cudaStream_t s);

// Multi-tensor forms: all `count` slots (one dtype) in as few launches as fit.
void launch_sgd_update_many(const ListSlot* slots, int count, DType dtype, const SgdUpdate& u,
                            cudaStream_t s);
void launch_adam_update_many(const ListSlot* slots, int count, DType dtype, const AdamUpdate& u,
                             cudaStream_t s);

// optim.cu: the loss scaler's pass over `count` gradient slots (slot.param: the gradient, of
// `dtype`): g *= inv_scale, and *found_inf (one device f32) = 1 if any element is inf or NaN.
void launch_non_finite_check_and_unscale(const ListSlot* slots, int count, DType dtype,
                                         double inv_scale, float* found_inf, cudaStream_t s);

// random.cu: the CPU backend's Philox mapping, so CUDA and CPU draw the same numbers.
void launch_uniform(void* out, DType dtype, int64_t numel, double low, double high,
                    uint64_t seed, uint64_t offset, cudaStream_t s);
void launch_normal(void* out, DType dtype, int64_t numel, double mean, double std,
                   uint64_t seed, uint64_t offset, cudaStream_t s);

}  // namespace cuda
}  // namespace tessera
