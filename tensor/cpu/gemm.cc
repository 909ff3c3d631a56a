// GEMM on the CPU: OpenBLAS's sgemm/dgemm (faster here than Eigen's own product); bf16 through
// oneDNN where the CPU has AVX-512 BF16 (gemm_onednn.h); other f16/bf16 operands widened to f32
// first. OpenBLAS keeps its own thread pool; it is told tessera's
// thread count before each call, and is never called from inside an OpenMP parallel region.
#include <cblas-openblas.h>  // OpenBLAS's own cblas.h (declares openblas_set_num_threads)

#include <vector>

#include "tensor/cpu/bf16_block.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/dispatch.h"
#include "tensor/cpu/gemm_onednn.h"
#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

namespace {

void sync_blas_threads() {
  static thread_local int current = -1;
  const int want = num_threads();
  if (want != current) {
    openblas_set_num_threads(want);
    current = want;
  }
}

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// Copies the (rows x cols) operand matrix at `src` (leading dim ld, maybe transposed) into a
// dense f32 buffer with the same layout, so the f32 GEMM can read it with the same ld.
template <typename T>
std::vector<float> widen_operand(const T* src, bool trans, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
  std::vector<float> dst(stored_rows * ld);
  for (int64_t r = 0; r < stored_rows; ++r) widen(src + r * ld, dst.data() + r * ld, stored_cols);
  return dst;
}

}  // namespace

void gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sync_blas_threads();
  cblas_sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
              int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  sync_blas_threads();
  cblas_dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

template <typename T>
void gemm_typed(const GemmArgs& g) {
  for (int64_t i = 0; i < g.batch; ++i) {
    const T* a = static_cast<const T*>(g.a) + i * g.stride_a;
    const T* b = static_cast<const T*>(g.b) + i * g.stride_b;
    T* c = static_cast<T*>(g.c) + i * g.stride_c;
    if constexpr (std::is_same_v<T, float>) {
      gemm_f32(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, c, g.ldc);
    } else if constexpr (std::is_same_v<T, double>) {
      gemm_f64(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a, g.lda, b, g.ldb, g.beta, c, g.ldc);
    } else {
      const std::vector<float> a32 = widen_operand(a, g.trans_a, g.m, g.k, g.lda);
      const std::vector<float> b32 = widen_operand(b, g.trans_b, g.k, g.n, g.ldb);
      std::vector<float> c32(g.m * g.n);
      for (int64_t r = 0; r < g.m; ++r) widen(c + r * g.ldc, c32.data() + r * g.n, g.n);
      gemm_f32(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a32.data(), g.lda, b32.data(),
               g.ldb, g.beta, c32.data(), g.n);
      for (int64_t r = 0; r < g.m; ++r) narrow(c32.data() + r * g.n, c + r * g.ldc, g.n);
    }
  }
}

}  // namespace

void CpuBackend::gemm(const GemmArgs& g) {
  if (g.dtype == kBF16 && onednn_bf16_available()) {
    gemm_bf16_onednn(g);
    return;
  }
  TS_DISPATCH_FLOATING(g.dtype, "gemm", [&] { gemm_typed<scalar_t>(g); });
}

}  // namespace cpu
}  // namespace tessera
