// Direct 3x3 convolution, stride 1, padding 1, f32, NCHW, one group: the shape of almost every
// convolution in a ResNet, in the forward pass and (with flipped weights) the input gradient.
//
// im2col + GEMM copies each input nine times into a patch matrix, which the GEMM then packs
// again; at 16-64 channels those copies cost as much as the arithmetic. This kernel reads the
// (zero-padded) input rows directly: for a block of KB output channels and XC output columns
// it keeps KB x XC sums in vector registers and adds w[k, c, i, j] * row(c, y + i)[x + j] for
// every input channel and tap. The machine code is chosen at run time for AVX-512, AVX2 or
// plain x86-64 (GCC target_clones), so the portable build still uses the wide units.
#pragma once

#include <cstdint>

namespace tessera {
namespace cpu {

// True when direct_conv3x3 handles this convolution (it also needs the output channels to be
// a multiple of 8, its smallest channel block; the weight gradient takes any channel counts).
bool direct_conv3x3_applies(int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                            int64_t dilation_w, int64_t groups);

// y[n, k, :, :] = bias[k] + sum_c w[k, c] * x[n, c] (3x3, stride 1, padding 1); bias may be
// null. Images run in parallel on tessera's threads.
void direct_conv3x3(const float* x, const float* w, const float* bias, float* y, int64_t n,
                    int64_t c, int64_t k, int64_t h, int64_t wd);

// dw[k, c] = sum over images and positions of dy[n, k] * x[n, c] shifted by each tap (the
// weight gradient of the same convolution). Images are summed in fixed blocks, then the blocks
// in order, so the result does not depend on the thread count.
void direct_conv3x3_backward_weight(const float* dy, const float* x, float* dw, int64_t n,
                                    int64_t c, int64_t k, int64_t h, int64_t wd);

}  // namespace cpu
}  // namespace tessera
