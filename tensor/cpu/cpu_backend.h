// CpuBackend: tessera's kernels for the CPU (Eigen types, OpenBLAS GEMM, OpenMP threads).
// Its methods are defined by family in this folder's .cc files; see tensor/backend.h for what
// each one must do.
#pragma once

#include "tensor/backend.h"

namespace tessera {
namespace cpu {

class CpuBackend final : public Backend {
 public:
  bool computes_natively(DType low_precision) override;
  bool winograd_available() override;
  bool channels_last(ChannelsLastKernel kernel, DType dtype) override;
  bool prefers_channels_last(ChannelsLastKernel kernel, DType dtype) override;
  bool channels_blocked(ChannelsLastKernel kernel, DType dtype) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, double value) override;
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double alpha,
             double beta) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void reduce(ReduceOp op, const Tensor& in, const Tensor& out, int64_t correction) override;
  void gemm(const GemmArgs& args) override;
  void softmax(const Tensor& in, const Tensor& out, bool log) override;
  void softmax_backward(const Tensor& grad_out, const Tensor& out, const Tensor& grad_in,
                        bool log) override;
  void cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing,
                     const Tensor& log_probs, const Tensor& loss) override;
  void cross_entropy_backward(const Tensor& log_probs, const Tensor& target,
                              const Tensor& row_grad, double label_smoothing,
                              const Tensor& grad_logits) override;
  void causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& q_positions, const Tensor& k_positions, double scale,
                        const AttentionBlocks& blocks, const Tensor& out,
                        const Tensor& logsumexp) override;
  void causal_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& out, const Tensor& logsumexp,
                                 const Tensor& q_positions, const Tensor& k_positions,
                                 double scale, const AttentionBlocks& blocks,
                                 const Tensor& grad_q, const Tensor& grad_k,
                                 const Tensor& grad_v) override;
  void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const Conv2dParams& p, const Tensor& out) override;
  void conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p,
                             const Tensor& grad_in) override;
  void conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, const Conv2dParams& p,
                              const Tensor& grad_weight) override;
  void conv2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                       const Conv2dParams& p, const Tensor& grad_in,
                       const Tensor& grad_weight) override;
  void max_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out,
                  const Tensor& indices) override;
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices,
                           const Tensor& grad_in) override;
  void avg_pool2d(const Tensor& input, const Pool2dParams& p, const Tensor& out) override;
  void avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p,
                           const Tensor& grad_in) override;
  void adaptive_avg_pool2d(const Tensor& input, const Tensor& out) override;
  void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) override;
  void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) override;
  void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                        const Tensor& weight, const Tensor& bias, const Tensor& out) override;
  void batch_norm_apply_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                             const Tensor& weight, const Tensor& bias, const Tensor& residual,
                             const Tensor& out) override;
  void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                           const Tensor& invstd, const Tensor& weight, bool training,
                           const Tensor& grad_in, const Tensor& grad_weight,
                           const Tensor& grad_bias) override;
  void batch_norm_relu_backward(const Tensor& grad_out, const Tensor& out, const Tensor& x,
                                const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                bool training, const Tensor& grad_in, const Tensor& grad_weight,
                                const Tensor& grad_bias, const Tensor& grad_residual) override;
  // Transformer layers: layer_norm.cc, gelu.cc, embedding.cc.
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  const Tensor& out, const Tensor& mean, const Tensor& rstd) override;
  void layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                           const Tensor& rstd, const Tensor& weight, const Tensor& grad_in,
                           const Tensor& grad_weight, const Tensor& grad_bias) override;
  void gelu(const Tensor& in, const Tensor& out, GeluApproximate approximate) override;
  void gelu_backward(const Tensor& grad_out, const Tensor& in, const Tensor& grad_in,
                     GeluApproximate approximate) override;
  void embedding_backward(const Tensor& grad_out, const Tensor& index,
                          const Tensor& grad_weight) override;
  void index_select(const Tensor& in, int64_t dim, const Tensor& index,
                    const Tensor& out) override;
  void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) override;
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                   const Tensor& src) override;
  void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                  const SgdUpdate& u) override;
  void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq,
                   const AdamUpdate& u) override;
  void non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                    double inv_scale) override;
  void uniform(const Tensor& out, double low, double high, uint64_t seed,
               uint64_t offset) override;
  void normal(const Tensor& out, double mean, double std, uint64_t seed,
              uint64_t offset) override;
};

// Row-major GEMM on raw pointers (OpenBLAS sgemm/dgemm), for kernels in this folder.
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc);
void gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
              const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
              int64_t ldc);

}  // namespace cpu
}  // namespace tessera
