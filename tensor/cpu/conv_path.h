// Which kernel runs an f32 convolution pass: tessera's direct 3x3 kernels, oneDNN's
// convolution primitives, or im2col + GEMM (conv.cc). The choice is per shape (and may be per
// pass; today's rules give each shape one side for all three passes), and comes from the
// per-layer table of //tools/bench:layer_bench (docs/BENCHMARKS.md, issues 15 and 31), not from
// taste.
//
// Determinism: tessera's own kernels give the same bits at any thread count; oneDNN's give the
// same bits run after run at one thread count, but its weight gradients split their sums by
// thread, so 1 and 2 threads differ in the last bits (as in PyTorch). The shapes that go to
// oneDNN (below) are those of ImageNet-style ResNets; ResNet-20 and the MLP keep their own.
//
// Set TESSERA_CONV=own or TESSERA_CONV=onednn in the environment to force one side for every
// f32 convolution (for benchmarks and tests that compare the two).
#pragma once

#include <cstdint>

#include "tensor/conv_params.h"
#include "tensor/shape.h"

namespace tessera {
namespace cpu {

enum class ConvPass { kForward, kBackwardInput, kBackwardWeight };

// True when oneDNN should run this f32 convolution pass. `input` is [N, C, H, W], `weight`
// [O, C/groups, KH, KW].
bool conv_uses_onednn(ConvPass pass, const Shape& input, const Shape& weight,
                      const Conv2dParams& p);

// True when an f32 convolution of this shape (or an f16/bf16 one on the f32 primitives) runs
// oneDNN's Winograd F(4x4, 3x3) primitives in all three passes (tensor/accelerator.h,
// allow_winograd): allowed, available on this CPU (oneDNN has them for AVX-512), not forced onto
// tessera's own kernels (TESSERA_CONV=own), and a shape where they measured faster: 3x3 at stride
// 1, no dilation or groups, padding at most 1, channel counts multiples of 16 from 32 to 256, and
// outputs of 8x8 or more. The primitives want nChw16c activations: NCHW and channels-last tensors
// alike are reordered into it and back.
bool conv_uses_winograd(const Shape& input, const Shape& weight, const Conv2dParams& p);

}  // namespace cpu
}  // namespace tessera
