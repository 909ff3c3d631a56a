// bf16 convolution through oneDNN on CPUs with AVX-512 BF16 (the same condition as bf16 GEMM,
// gemm_onednn.h).
//
// Without it a bf16 convolution widens input and weights to f32 and runs the f32 kernels, so
// bf16 autocast made convolutions slower than f32. oneDNN's bf16 kernels want channel-blocked
// layouts (nChw16c); tessera's tensors are plain NCHW, so each call reorders into the layout
// the primitive picked and back, and still wins: measured on the build machine (one thread,
// forward + both backwards, reorders included) 4.7 ms against tessera's f32 direct 3x3 kernels'
// 6.4 ms and the widening path's 8.3 ms for a ResNet-20 stage-1 convolution (N32 C16 32x32).
// Accumulation is f32 inside oneDNN; each result is rounded to bf16 once.
#pragma once

#include "tensor/conv_params.h"
#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

// All tensors contiguous NCHW / OIHW bf16, shapes checked by ops_nn.cc; bias may be undefined.
void conv2d_bf16_onednn(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Conv2dParams& p, const Tensor& out);
void conv2d_backward_input_bf16_onednn(const Tensor& grad_out, const Tensor& weight,
                                       const Conv2dParams& p, const Tensor& grad_in);
void conv2d_backward_weight_bf16_onednn(const Tensor& grad_out, const Tensor& input,
                                        const Conv2dParams& p, const Tensor& grad_weight);

}  // namespace cpu
}  // namespace tessera
