// Batch norm's CPU kernels on channels-last activations (batch_norm.cc calls them when its
// [N, C, S] operands are NHWC-ordered, strides [S*C, 1, C]; ops_batch_norm.cc passes every
// operand of a call in one layout). Same formulas, statistics and rounding points as the NCHW
// kernels; the sums are added in another order, so f32 results agree to rounding, not bits.
#pragma once

#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

// [N, C, S] with strides [S*C, 1, C] (size-1 dims' strides ignored). A tensor can be both this
// and contiguous (same bytes either way); the kernels take NHWC ones that are not.
bool is_channels_last_ncs(const Tensor& x);
// What the CPU batch norm entry points branch on: NHWC-ordered and not also contiguous.
inline bool runs_channels_last(const Tensor& x) {
  return is_channels_last_ncs(x) && !x.is_contiguous();
}
// Uninitialized, of like's shape and options, laid out so.
Tensor empty_channels_last_ncs(const Tensor& like);

void batch_norm_stats_channels_last(const Tensor& x, const Tensor& mean, const Tensor& var);
// out = x * scale + shift [+ residual], then max(0, .) when relu; residual may be undefined.
void batch_norm_apply_channels_last(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                    const Tensor& weight, const Tensor& bias,
                                    const Tensor& residual, bool relu, const Tensor& out);
// Batch norm's backward; with relu_out defined, of batch norm + ReLU: the masked gradient
// grad_out * (relu_out > 0) is written to `masked` and used in place of grad_out.
void batch_norm_backward_channels_last(const Tensor& grad_out, const Tensor& relu_out,
                                       const Tensor& masked, const Tensor& x, const Tensor& mean,
                                       const Tensor& invstd, const Tensor& weight, bool training,
                                       const Tensor& grad_in, const Tensor& grad_weight,
                                       const Tensor& grad_bias);

}  // namespace cpu
}  // namespace tessera
