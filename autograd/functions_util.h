// Helpers shared by the functions_*.cc files (internal to //autograd).
#pragma once

#include "autograd/variable.h"
#include "tensor/ops.h"

namespace tessera {
namespace detail {

// What a backward needs to know about an input without keeping its data alive.
struct InputMeta {
  Shape shape;
  DType dtype = kF32;
  bool needs_grad = false;
};

inline InputMeta meta(const Variable& v) { return {v.shape(), v.dtype(), v.requires_grad()}; }

// The gradient of a (possibly broadcast) input: summed back to its shape, in its dtype;
// undefined when the input needs no gradient.
inline Tensor reduce_to(const Tensor& grad, const InputMeta& input) {
  if (!input.needs_grad) return Tensor();
  return sum_to(grad, input.shape).to(input.dtype);
}

}  // namespace detail
}  // namespace tessera
