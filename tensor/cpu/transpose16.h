// 16-bit (bf16, f16) activations between NCHW and NHWC: the reorders oneDNN's bf16 convolutions
// want on CPUs with AMX, whose primitives pick channels-last (NHWC) for activations, and every
// 16-bit copy between the two layouts (CpuBackend::copy: tensors made channels-last).
//
// Each image is a matrix transpose, [C][H*W] <-> [H*W][C]. oneDNN 2.6's own bf16 reorder for it
// (`jit:uni`) took 3.7-5.1 ms for one 8x256x56x56 tensor, warm, a sixth of ResNet-50's bf16
// step in reorders. Here AVX-512 transposes tiles of 32 rows x 16 columns in registers: rows are
// interleaved in pairs (two 16-bit values make one 32-bit lane), a 16 x 16 transpose of 32-bit
// lanes follows, and each of the 16 results is one whole 64-byte output row segment. Edge tiles
// (ResNet-20's 16 channels, 7x7 maps) use masked loads and stores; CPUs without AVX-512 BW take
// a scalar loop.
#pragma once

#include <cstdint>

namespace tessera {
namespace cpu {

// x: [n][c][s] -> y: [n][s][c], and back; 16-bit values moved as they are.
void nchw_to_nhwc_16bit(const uint16_t* x, uint16_t* y, int64_t n, int64_t c, int64_t s);
void nhwc_to_nchw_16bit(const uint16_t* y, uint16_t* x, int64_t n, int64_t c, int64_t s);

}  // namespace cpu
}  // namespace tessera
