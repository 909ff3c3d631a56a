// Convolutions through oneDNN (Debian's libdnnl 2.6, the library PyTorch's CPU convolutions run
// on), for bf16 on CPUs with AVX-512 BF16 and for the f32 shapes where it beats tessera's own
// kernels (conv_path.h decides which).
//
// bf16: without oneDNN a bf16 convolution widens input and weights to f32 and runs the f32
// kernels, so bf16 autocast made convolutions slower than f32. Measured on the build machine
// (one thread, forward + both backwards, reorders included) 4.7 ms against tessera's f32 direct
// 3x3 kernels' 6.4 ms and the widening path's 8.3 ms for a ResNet-20 stage-1 convolution
// (N32 C16 32x32). Accumulation is f32 inside oneDNN; each result is rounded to bf16 once.
//
// Both types: oneDNN's kernels want channel-blocked layouts (nChw16c); tessera's tensors are
// plain NCHW, so each call reorders into the layout the primitive picked and back (as PyTorch
// eager does), and oneDNN's primitive cache keeps the compiled kernels between calls.
#pragma once

#include <initializer_list>

#include "tensor/conv_params.h"
#include "tensor/tensor.h"

namespace tessera {
namespace cpu {

// True when oneDNN 2.6 has its Winograd F(4x4, 3x3) f32 primitives on this CPU (AVX-512):
// asked once, by building one of each pass (and the forward with a bias).
bool onednn_winograd_available();

// True when oneDNN's bf16 convolutions run natively here and pick NHWC activations (on CPUs
// with AMX; with AVX-512 BF16 alone they pick nChw16c): asked once, of a 64-channel 3x3 layer.
bool onednn_bf16_prefers_nhwc();

// True when any of a convolution's activations is channels-last NHWC and not also contiguous
// NCHW (a tensor with one channel or 1x1 maps is both). f32 convolutions then give oneDNN's
// primitives all their activations as NHWC, without reorders.
bool any_nhwc(std::initializer_list<const Tensor*> activations);

// True when any of a convolution's activations is channels-blocked (nChw16c): its primitives
// then read and write those as they are (the ones with fewer than 16 channels, the stem's RGB
// input, stay NCHW and are reordered where the primitive wants).
bool any_channels_blocked(std::initializer_list<const Tensor*> activations);

// Weights contiguous OIHW; activations contiguous NCHW, channels-last NHWC or channels-blocked
// nChw16c; shapes checked
// by ops_nn.cc; bias may be undefined. f32, or bf16 on CPUs with native bf16 (bf16 primitives);
// f16, and bf16 elsewhere, run the f32 primitives, converted in the reorders into and out of
// their layouts (channel_blocks.h), so no whole widened copy is made first. Results are those of
// the f32 primitives on the widened values, rounded once.
void conv2d_onednn(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& p, const Tensor& out);
void conv2d_backward_input_onednn(const Tensor& grad_out, const Tensor& weight,
                                  const Conv2dParams& p, const Tensor& grad_in);
void conv2d_backward_weight_onednn(const Tensor& grad_out, const Tensor& input,
                                   const Conv2dParams& p, const Tensor& grad_weight);
// Both backward passes, the output gradient reordered once when both primitives want the same
// layout.
void conv2d_backward_onednn(const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                            const Conv2dParams& p, const Tensor& grad_in,
                            const Tensor& grad_weight);

}  // namespace cpu
}  // namespace tessera
