// Convolution by im2col + GEMM (conv_im2col.cc): every shape, group count, stride, padding
// and dilation, for f32, f64, f16 and bf16 NCHW tensors (contiguous; bias may be undefined).
// The CPU backend's fallback behind its direct 3x3 kernels and oneDNN (conv.cc chooses).
// f16/bf16 compute in f32 a task of images at a time, each result rounded once.
#pragma once

#include "tensor/conv_params.h"
#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

void im2col_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& p, const Tensor& out);
void im2col_conv2d_backward_input(const Tensor& grad_out, const Tensor& weight,
                                  const Conv2dParams& p, const Tensor& grad_in);
void im2col_conv2d_backward_weight(const Tensor& grad_out, const Tensor& input,
                                   const Conv2dParams& p, const Tensor& grad_weight);

}  // namespace cpu
}  // namespace tessera
