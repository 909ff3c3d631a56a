#include "tensor/cpu/gemm_onednn.h"

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
// col * ld + row when transposed; a batch stride of 0 (broadcast) becomes a batch of 1.
memory::desc operand(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t ld,
                     bool trans) {
  const int64_t b = batch_stride == 0 ? 1 : batch;
  const int64_t bs = batch_stride == 0 ? rows * cols : batch_stride;
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

}  // namespace cpu
}  // namespace tessera
