// bf16 GEMM through oneDNN's matmul, on CPUs with AVX-512 BF16 (VDPBF16PS: dot products of bf16
// pairs accumulated in f32).
//
// OpenBLAS (Debian's) has no bf16 GEMM, so without this a bf16 product widens both operands to
// f32 and runs sgemm: more memory traffic than f32 itself, never faster. oneDNN's bf16 matmul
// reads the 2-byte operands directly and does twice the multiply-adds per instruction. Measured
// on the build machine's AMD EPYC (one thread, best of 20): 195-229 GFLOP/s against OpenBLAS
// f32's 64-105 (2.0x at 1024^3, 3.2x for the tall-skinny 16384x144x16 of a small conv) and the
// widening path's 32-77. Accumulation is f32; C is rounded to bf16 once, as before.
#pragma once

#include "tensor/backend.h"

namespace tessera {
namespace cpu {

// True when oneDNN runs bf16 natively on this CPU (AVX-512 BF16 or AMX); otherwise the caller
// keeps the widening path (oneDNN would emulate bf16, which was not measured to pay off).
// TESSERA_ONEDNN=off in the environment keeps the widening path everywhere (for comparisons).
bool onednn_bf16_available();

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for bf16 operands, row-major with leading
// dimensions and batch strides exactly as GemmArgs describes (stride 0 broadcasts an operand).
void gemm_bf16_onednn(const GemmArgs& g);

}  // namespace cpu
}  // namespace tessera
