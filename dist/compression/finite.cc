#include "dist/compression/finite.h"

#include <cmath>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace compression {

bool all_finite(const Tensor& x_in) {
  TS_CHECK(x_in.dtype() == kF32, "all_finite: expected f32, got ", x_in.dtype());
  const Tensor x = x_in.contiguous();
  const float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!std::isfinite(v[i])) return false;
  }
  return true;
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
