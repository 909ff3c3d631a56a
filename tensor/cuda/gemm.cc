// CudaBackend::gemm on cuBLAS.
//
// tessera's matrices are row-major and cuBLAS's column-major; a row-major matrix read as
// column-major is its transpose. So C = op(A) op(B) (row-major) is computed as
// C^T = op(B)^T op(A)^T (column-major): B goes first, m and n swap, and each transpose flag
// carries over unchanged. f16 and bf16 accumulate in f32; f32 uses TF32 tensor cores only
// when allow_tf32() is set.
#include "tensor/accelerator.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/handles.h"

namespace tessera {
namespace cuda {

namespace {

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  bool double_scalars;
};

GemmTypes gemm_types(DType dtype) {
  switch (dtype) {
    case kF32:
      return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
    case kF64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true};
    case kF16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false};
    case kBF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false};
    default:
      TS_FAIL("matmul on CUDA supports f32, f64, f16 and bf16, not ", dtype);
  }
}

int as_int(int64_t v, const char* what) {
  TS_CHECK(v >= 0 && v <= INT32_MAX, "cuBLAS GEMM: ", what, " = ", v, " does not fit in int");
  return static_cast<int>(v);
}

}  // namespace

void CudaBackend::gemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  const GemmTypes t = gemm_types(g.dtype);
  DeviceGuard guard(g.device);
  cublasHandle_t handle = cublas_handle(g.device.index());
  const float alpha_f = static_cast<float>(g.alpha), beta_f = static_cast<float>(g.beta);
  const void* alpha = t.double_scalars ? static_cast<const void*>(&g.alpha) : &alpha_f;
  const void* beta = t.double_scalars ? static_cast<const void*>(&g.beta) : &beta_f;
  TS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      as_int(g.n, "n"), as_int(g.m, "m"), as_int(g.k, "k"), alpha, g.b, t.data,
      as_int(g.ldb, "ldb"), g.stride_b, g.a, t.data, as_int(g.lda, "lda"), g.stride_a, beta, g.c,
      t.data, as_int(g.ldc, "ldc"), g.stride_c, as_int(g.batch, "batch"), t.compute,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace cuda
}  // namespace tessera
