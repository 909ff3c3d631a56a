// Activations between tessera's plain NCHW and oneDNN's channel-blocked nChw16c, and weights
// between OIHW and oneDNN's layouts with both channel counts in blocks of 16, converting between
// f16/bf16 and f32 on the way: the reorders that let oneDNN's f32 convolutions take half-precision
// tensors without a widened copy of the whole tensor first.
//
// nChw16c stores channel c of image i at position j as [i][c / 16][j][c % 16]. With C a multiple of
// 16, image i's channels 16b..16b+15 fill the same 16 * H * W elements in both layouts, so each
// (image, block of 16 channels) is one task: its 16 rows are widened a piece at a time into a
// buffer and interleaved (to_channel_blocks), or de-interleaved and narrowed (from_channel_blocks).
// One pass over each tensor, where widening first and then reordering took two (and narrowing after
// reordering back, two more).
//
// Weights [O, I, kh, kw]: oneDNN keeps each 16 x 16 tile of (output, input) channels at one kernel
// position together, the tiles placed by strides it chooses per primitive (OIhw16i16o for a
// forward, IOhw16o16i for an input gradient, ...). Each task widens a tile-row's 16 output channels
// of 16 * kh * kw contiguous values into a buffer and scatters them into the tiles
// (to_weight_blocks), or gathers and narrows (from_weight_blocks, the weight gradient). f32 weight
// gradients take this way back as well: oneDNN's own reorder out of its tiles was slow for 1x1
// weights with many input channels (3.2 ms for ResNet-50's 512x2048, against 0.7 here).
//
// Every value converts exactly (widening) or is rounded once to nearest even (narrowing), as
// widen/narrow in bf16_block.h and f16_block.h do, so results equal those of widening the tensor
// first and running oneDNN's f32 reorder bit for bit.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/half.h"

namespace tessera {
namespace cpu {

// x: [n, c, s] of T (plain NCHW, s = H*W), blocked: [n, c / 16, s, 16] of f32; c % 16 == 0.
// T: Half or BFloat16.
template <typename T>
void to_channel_blocks(const T* x, float* blocked, int64_t n, int64_t c, int64_t s);
template <typename T>
void from_channel_blocks(const float* blocked, T* x, int64_t n, int64_t c, int64_t s);

// Where oneDNN keeps the tile of output block ob and input block ib at kernel position (h, w):
//   ob * stride[0] + ib * stride[1] + h * stride[2] + w * stride[3];
// inside it, the block's output channel o and input channel i are at o + 16 * i when
// o_innermost (16i16o), else at 16 * o + i (16o16i).
struct WeightBlocks {
  int64_t o, i, kh, kw;  // the weight's shape; o and i multiples of 16
  int64_t stride[4];
  bool o_innermost;
};
// T: Half or BFloat16 both ways, and float for the way back (f32 weight gradients).
template <typename T>
void to_weight_blocks(const T* w, float* blocked, const WeightBlocks& b);
template <typename T>
void from_weight_blocks(const float* blocked, T* w, const WeightBlocks& b);

}  // namespace cpu
}  // namespace tessera
