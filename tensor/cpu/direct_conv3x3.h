// Direct 3x3 convolution, padding 1, stride 1 or 2, f32, NCHW, one group: the shape of almost
// every convolution in a ResNet: the forward pass, the input gradient (at stride 1 a forward
// pass with flipped weights; at stride 2 a transposed convolution) and the weight gradient.
//
// im2col + GEMM copies each input nine times into a patch matrix, which the GEMM then packs
// again; at 16-64 channels those copies cost as much as the arithmetic. These kernels read the
// zero-padded input planes directly, with output channels in the lanes of each vector and
// the sums for a tile of positions (forward) or of input channels and taps (weight gradient)
// held in registers. Each is compiled twice, for AVX-512 (16 channels per vector, 32 registers)
// and for AVX2 (8 per vector, 16 registers, smaller tiles), and runs the variant the machine
// has, whatever the build's -march; elsewhere im2col + GEMM serves these convolutions.
#pragma once

#include <cstdint>

#include "tensor/half.h"

namespace tessera {
namespace cpu {

// The vector width the kernels run at on this machine: 16 floats with AVX-512, 8 with AVX2
// (and FMA), 0 when neither is there (or TESSERA_SIMD=none; TESSERA_SIMD=avx2 picks the AVX2
// kernels on an AVX-512 machine, for tests and comparisons).
int direct_conv3x3_lanes();

// True when direct_conv3x3 handles this convolution on this machine (AVX-512 or AVX2). It also asks for
// output channels in multiples of 8: narrower layers would leave most of a vector's 16 lanes
// idle, and im2col + GEMM serves them. (The weight gradient takes any channel counts.)
bool direct_conv3x3_applies(int64_t out_channels, int64_t kh, int64_t kw, int64_t stride_h,
                            int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                            int64_t dilation_w, int64_t groups);

// y[n, k, :, :] = bias[k] + sum_c w[k, c] * x[n, c] (3x3, padding 1, stride 1 or 2: y is
// ((h - 1) / stride + 1) x ((wd - 1) / stride + 1)); bias may be null. Images run in parallel
// on tessera's threads. T is float, or Half / BFloat16 for x and y: each input plane is then
// widened as it is padded and each output row rounded once as it is copied out, with f32
// weights, bias and arithmetic, so the result is the f32 kernel's on the widened input,
// rounded, without a widened copy of either tensor.
template <typename T>
void direct_conv3x3(const T* x, const float* w, const float* bias, T* y, int64_t n, int64_t c,
                    int64_t k, int64_t h, int64_t wd, int stride);

// dx of the stride-2 convolution y = direct_conv3x3(x, w, ..., stride 2): dy is n x k x ho x wo,
// w is k x c x 3 x 3 (the forward's), dx is n x c x h x wd and written whole. Its channels c
// are the vector lanes, so direct_conv3x3_applies(c, ...) says when to use it.
void direct_conv3x3_backward_input_stride2(const float* dy, const float* w, float* dx, int64_t n,
                                           int64_t c, int64_t k, int64_t h, int64_t wd);

// dw[k, c] = sum over images and positions of dy[n, k] * x[n, c] shifted by each tap (the
// weight gradient of the same convolution). Images are summed in fixed blocks, then the blocks
// in order, so the result does not depend on the thread count. T is float, or Half / BFloat16
// for dy and x, widened an image at a time as they are padded and blocked (dw stays f32).
template <typename T>
void direct_conv3x3_backward_weight(const T* dy, const T* x, float* dw, int64_t n, int64_t c,
                                    int64_t k, int64_t h, int64_t wd, int stride);

}  // namespace cpu
}  // namespace tessera
