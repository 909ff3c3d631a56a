#include "dist/compression/half_precision.h"

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace compression {

HalfPrecision::HalfPrecision(DType dtype) : dtype_(dtype) {
  TS_CHECK(is_half(dtype), "HalfPrecision: dtype must be f16 or bf16, got ", dtype);
}

Tensor HalfPrecision::compress(const Tensor& x, const CompressContext& ctx) {
  return div(x, static_cast<double>(ctx.world)).to(dtype_);
}

void HalfPrecision::decompress_add(const Tensor& message, Tensor& out, const CompressContext& ctx) const {
  add_(out, mul(message.to(kF32), static_cast<double>(ctx.world)));
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
