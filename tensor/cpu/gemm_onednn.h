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

// True when the f32 GEMMs of im2col convolutions (conv.cc) run on oneDNN's sgemm instead of
// OpenBLAS's: on CPUs where oneDNN runs AVX-512. On an Intel Xeon with AMX its sgemm ran the
// thin products of ResNet-50's 1x1 convolutions 1.1-1.6x faster than OpenBLAS's (one thread, 8
// images: 64->256 channels at 56x56 in 4.3 ms against 5.5 forward, 4.5 against 6.6 for the
// input gradient). AVX2-only CPUs, where this was not measured, keep OpenBLAS.
// TESSERA_CONV_GEMM=openblas keeps OpenBLAS everywhere (for comparisons), =onednn forces oneDNN.
bool onednn_sgemm_for_conv();

// C = alpha op(A) op(B) + beta C in f32, row-major, by oneDNN's sgemm on the calling thread
// alone, whatever tessera's thread count: oneDNN may split the k dimension between threads,
// which would make the sums' rounding depend on the thread count. Callers split the work into
// pieces that depend only on the shape and run those on tessera's threads.
void gemm_f32_onednn_one_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* a, int64_t lda, const float* b,
                                int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpu
}  // namespace tessera
