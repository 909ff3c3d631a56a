// Batch norm's CPU kernels on channels-blocked activations (nChw16c, tensor.h's
// MemoryFormat::kChannelsBlocked): batch_norm.cc calls them when x is so, and
// ops_batch_norm.cc then passes every activation of the call so. f32 only
// (Backend::channels_blocked). Same formulas and rounding points as the NCHW kernels
// (batch_norm.cc); the sums are added in another order, so results agree to rounding, not bits.
#pragma once

#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

void batch_norm_stats_blocked(const Tensor& x, const Tensor& mean, const Tensor& var);
// out = x * scale + shift [+ residual], then max(0, .) when relu; residual may be undefined.
void batch_norm_apply_blocked(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                              const Tensor& weight, const Tensor& bias, const Tensor& residual,
                              bool relu, const Tensor& out);
// Batch norm's backward; with relu_out defined, of batch norm + ReLU: the masked gradient
// grad_out * (relu_out > 0) is written to `masked` and used in place of grad_out (masked may be
// grad_in, which the gradient pass then overwrites where it has read it).
void batch_norm_backward_blocked(const Tensor& grad_out, const Tensor& relu_out,
                                 const Tensor& masked, const Tensor& x, const Tensor& mean,
                                 const Tensor& invstd, const Tensor& weight, bool training,
                                 const Tensor& grad_in, const Tensor& grad_weight,
                                 const Tensor& grad_bias);

}  // namespace cpu
}  // namespace tessera
