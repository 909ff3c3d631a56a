// Reductions: the reduced dims are permuted to the end and packed, so every Backend only needs
// one kernel shape: reduce each row of a contiguous [outer, inner] matrix.
#include <algorithm>
#include <limits>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

// Normalized, sorted, de-duplicated dims; empty means all.
std::vector<bool> reduced_mask(const Tensor& a, const Shape& dims, const char* op) {
  std::vector<bool> mask(a.dim(), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, a.dim(), op);
    TS_CHECK(!mask[w] || dims.empty(), op, ": dim ", w, " repeated in ", dims);
    mask[w] = true;
  }
  return mask;
}

DType reduce_output_dtype(ReduceOp op, DType in) {
  switch (op) {
    case ReduceOp::kArgmax:
    case ReduceOp::kArgmin:
      return kI64;
    case ReduceOp::kSum:
      return is_floating(in) ? in : kI64;
    default:
      return in;
  }
}

Tensor reduce(ReduceOp op, const Tensor& a, const Shape& dims, bool keepdim, int64_t correction,
              const char* name) {
  detail::check_defined(a, name);
  if ((op == ReduceOp::kMean || op == ReduceOp::kVar) && !is_floating(a.dtype())) {
    return reduce(op, a.to(kF32), dims, keepdim, correction, name);
  }
  if (a.is_channels_blocked()) {  // no strides to permute: read as NCHW
    return reduce(op, a.contiguous(), dims, keepdim, correction, name);
  }
  const std::vector<bool> mask = reduced_mask(a, dims, name);
  Shape perm, out_shape, kept_shape;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (!mask[d]) {
      perm.push_back(d);
      outer *= a.size(d);
      kept_shape.push_back(a.size(d));
    }
  }
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (mask[d]) {
      perm.push_back(d);
      inner *= a.size(d);
    }
    if (!mask[d] || keepdim) out_shape.push_back(mask[d] ? 1 : a.size(d));
  }
  const bool needs_elements = op == ReduceOp::kMax || op == ReduceOp::kMin ||
                              op == ReduceOp::kArgmax || op == ReduceOp::kArgmin;
  TS_CHECK(inner > 0 || !needs_elements, name, ": cannot reduce over an empty dim (input shape ",
           a.shape(), ")");
  const Tensor rows = a.permute(perm).contiguous().view({outer, inner});
  Tensor out = empty({outer}, TensorOptions(reduce_output_dtype(op, a.dtype())).device(a.device()));
  backend(a.device()).reduce(op, rows, out, correction);
  return out.view(out_shape);
}

}  // namespace

Tensor sum(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::kSum, a, dims, keepdim, 0, "sum");
}
Tensor mean(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::kMean, a, dims, keepdim, 0, "mean");
}
Tensor amax(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::kMax, a, dims, keepdim, 0, "amax");
}
Tensor amin(const Tensor& a, const Shape& dims, bool keepdim) {
  return reduce(ReduceOp::kMin, a, dims, keepdim, 0, "amin");
}
Tensor var(const Tensor& a, const Shape& dims, int64_t correction, bool keepdim) {
  TS_CHECK(correction >= 0, "var: correction must be >= 0, got ", correction);
  return reduce(ReduceOp::kVar, a, dims, keepdim, correction, "var");
}
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce(ReduceOp::kArgmax, a, {dim}, keepdim, 0, "argmax");
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce(ReduceOp::kArgmin, a, {dim}, keepdim, 0, "argmin");
}
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return {reduce(ReduceOp::kMax, a, {dim}, keepdim, 0, "max"), argmax(a, dim, keepdim)};
}
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return {reduce(ReduceOp::kMin, a, {dim}, keepdim, 0, "min"), argmin(a, dim, keepdim)};
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
  if (a.shape() == shape) return a;
  TS_CHECK(a.dim() >= static_cast<int64_t>(shape.size()), "sum_to: cannot sum shape ", a.shape(),
           " down to ", shape);
  const int64_t lead = a.dim() - static_cast<int64_t>(shape.size());
  Shape dims;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && a.size(d) != 1) {
      dims.push_back(d);
    } else {
      TS_CHECK(shape[d - lead] == a.size(d), "sum_to: cannot sum shape ", a.shape(), " down to ",
               shape);
    }
  }
  if (dims.empty()) return a.reshape(shape);
  return sum(a, dims, true).reshape(shape);
}

}  // namespace tessera
