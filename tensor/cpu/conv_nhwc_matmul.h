// bf16 convolution backward passes on channels-last activations as matmuls, where oneDNN 2.6's
// convolution backward is slow on AMX.
//
// With NHWC activations a 1x1 convolution is a product of matrices: y[P, K] = x[P, C] W[K, C]^T
// over the P = N * Ho * Wo output positions (stride s > 1 samples x at every s-th row and
// column). Its gradients are two more products:
//   weight: dW[K, C] = dy[P, K]^T x_s[P, C]      input: dx_s[P, C] = dy[P, K] W[K, C]
// (x_s, dx_s: the sampled positions; at stride 1 all of them, and elsewhere dx is zero).
// A larger kernel's weight gradient is the same product with im2col's matrix in place of x_s:
// cols[P, KH * KW * C], each row the KH x KW window of C-channel pixels (zeros in the padding)
// one output reads, so dW[K, (i, j, c)] = dy^T cols, then permuted to [K, C, KH, KW].
//
// oneDNN 2.6's bf16 backward on AMX (`jit:avx512_core_amx_bf16`) is slow for these layers where
// its matmul (`brg:avx512_core_amx_bf16`) is not. Measured on ResNet-50's layers at batch 8, one
// thread, oneDNN alone (ms, convolution primitive against matmul; im2col not included):
//   - 1x1 weight gradients: 3.7 -> 0.8 (1024 -> 256 channels, 14x14), 8.0 -> 1.2 (2048 -> 512,
//     7x7), 19.4 -> 2.5 (1024 -> 2048, stride 2): about 4x the forward's time before, level
//     after;
//   - 1x1 input gradients: 0.7-0.9 -> 0.5-0.7 at stride 1, 4.5-6.0 -> 1.2-2.6 at stride 2
//     (before the scatter into the zeroed gradient);
//   - 3x3 weight gradients: 5.7 -> 2.1 (512 channels, 7x7), 13.8 -> 2.2 (512, stride 2 to 7x7),
//     6.7 -> 2.5 (256, stride 2 to 14x14), 4.1 -> 2.1 (128, stride 2 to 28x28); but 3.1 -> 2.7
//     (256, 14x14), 1.9 -> 1.9 (128, 28x28), 1.9 -> 2.3 (64, 56x56), before making cols.
// So 1x1 layers take both passes here, and larger kernels their weight gradient where the stride
// is 2 or more or the output has at most 8x8 positions, with 16 channels or more and im2col's
// matrix at most 64 MiB (it is made whole). In whole ResNet bf16 steps the larger kernels' rule
// measured 2-6% faster than 1x1 layers alone, and all larger kernels (big maps and the 3-channel
// stem too) 2-25% slower (docs/BENCHMARKS.md, fourteenth session). Tensors with 1x1 maps or one
// channel are NCHW and NHWC at once, so they take this path from NCHW models too (the same
// bytes; only the order of the sums differs).
//
// Accumulation is f32 inside oneDNN and each result is rounded to bf16 once, as in the
// convolution primitives; the sums run in another order, so results differ by rounding.
#pragma once

#include <initializer_list>

#include "tensor/conv_params.h"
#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

// True when this pass runs as a matmul: bf16 on a CPU where oneDNN runs it natively, no groups,
// every activation channels-last, and the shape rule above. `input` is [N, C, H, W], `weight`
// [K, C, KH, KW].
bool conv_backward_input_as_matmul(DType dtype, const Shape& weight, const Conv2dParams& p,
                                   std::initializer_list<const Tensor*> activations);
bool conv_backward_weight_as_matmul(DType dtype, const Shape& input, const Shape& weight,
                                    const Conv2dParams& p,
                                    std::initializer_list<const Tensor*> activations);

// dx from dy (both NHWC) and the contiguous weight; every element of grad_in is written.
void conv_backward_input_matmul(const Tensor& grad_out, const Tensor& weight,
                                const Conv2dParams& p, const Tensor& grad_in);
// dW (contiguous [K, C, KH, KW]) from dy and x (both NHWC).
void conv_backward_weight_matmul(const Tensor& grad_out, const Tensor& input,
                                 const Conv2dParams& p, const Tensor& grad_weight);

}  // namespace cpu
}  // namespace tessera
