#include "tensor/cpu/gemm_onednn.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>

#include "tensor/check.h"

namespace tessera {
namespace cpu {

namespace {

using dnnl::memory;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// An operand's [batch, rows, cols] layout: (row, col) sits at row * ld + col, or at
// col * ld + row when transposed; a batch stride of 0 (broadcast) becomes a batch of 1. A batch
// of 1 gets the stride of one whole matrix whatever the caller's was: a transposed [8, 1000]
// view came with 1000, and oneDNN 2.6 took that layout for an unusual one and ran its slow
// `gemm:jit` matmul instead of the AMX one (a ResNet's last Linear layer's weight gradient: 6-17
// ms a step where the AMX kernel takes 0.6).
memory::desc operand(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t ld,
                     bool trans) {
  const int64_t b = batch_stride == 0 ? 1 : batch;
  const int64_t bs = b == 1 ? (trans ? cols : rows) * ld : batch_stride;
  const memory::dims strides = trans ? memory::dims{bs, 1, ld} : memory::dims{bs, ld, 1};
  return memory::desc({b, rows, cols}, memory::data_type::bf16, strides);
}

}  // namespace

bool onednn_bf16_available() {
  static const bool available = [] {
    const char* setting = std::getenv("TESSERA_ONEDNN");
    if (setting != nullptr && std::strcmp(setting, "off") == 0) return false;
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return available;
}

void gemm_bf16_onednn(const GemmArgs& g) {
  TS_INTERNAL_ASSERT(g.dtype == kBF16, "gemm_bf16_onednn: got ", g.dtype);
  const memory::desc a = operand(g.batch, g.stride_a, g.m, g.k, g.lda, g.trans_a);
  const memory::desc b = operand(g.batch, g.stride_b, g.k, g.n, g.ldb, g.trans_b);
  const memory::desc c = operand(g.batch, g.stride_c, g.m, g.n, g.ldc, false);
  dnnl::primitive_attr attr;
  if (g.alpha != 1) attr.set_output_scales(0, {static_cast<float>(g.alpha)});
  if (g.beta != 0) {
    dnnl::post_ops ops;
    ops.append_sum(static_cast<float>(g.beta));
    attr.set_post_ops(ops);
  }
  // oneDNN keeps a cache of built primitives keyed by these descriptors, so a training loop's
  // repeated shapes pay for code generation once.
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
  const dnnl::matmul matmul(pd);
  memory am(a, engine(), const_cast<void*>(g.a));
  memory bm(b, engine(), const_cast<void*>(g.b));
  memory cm(c, engine(), g.c);
  dnnl::stream stream(engine());
  matmul.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

bool onednn_sgemm_for_conv() {
  static const bool chosen = [] {
    const char* setting = std::getenv("TESSERA_CONV_GEMM");
    if (setting != nullptr && std::strcmp(setting, "openblas") == 0) return false;
    if (setting != nullptr && std::strcmp(setting, "onednn") == 0) return true;
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & avx512) == avx512;
  }();
  return chosen;
}

void gemm_f32_onednn_one_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* a, int64_t lda, const float* b,
                                int64_t ldb, float beta, float* c, int64_t ldc) {
  // oneDNN's OpenMP build sizes its sgemm by omp_get_max_threads(), which reads the calling
  // thread's own setting: 1 for the call, then back.
  const int threads = omp_get_max_threads();
  if (threads > 1) omp_set_num_threads(1);
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k,
                                          alpha, a, lda, b, ldb, beta, c, ldc);
  if (threads > 1) omp_set_num_threads(threads);
  TS_INTERNAL_ASSERT(status == dnnl_success, "dnnl_sgemm failed with status ",
                     static_cast<int>(status), " (m ", m, ", n ", n, ", k ", k, ")");
}

}  // namespace cpu
}  // namespace tessera
