// matmul: shapes as torch.matmul; the product itself is one (batched) GEMM call.
//
// A GEMM reads each matrix operand either as row-major or as the transpose of a row-major
// matrix, with a leading dimension. A transposed view (x.t(), w.transpose(-1, -2)) is exactly
// such a transposed operand, so it is passed with trans = true instead of being copied.
#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

struct Operand {
  Tensor t;  // [batch, rows, cols]
  bool trans = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// Expresses a 3-D tensor's matrices as GEMM operands, copying only when neither layout fits.
Operand gemm_operand(const Tensor& t3) {
  const int64_t rows = t3.size(1), cols = t3.size(2);
  const int64_t rs = t3.stride(1), cs = t3.stride(2);
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1))) {
    return {t3, false, rows == 1 ? std::max<int64_t>(cols, 1) : rs, t3.stride(0)};
  }
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1))) {
    return {t3, true, cols == 1 ? std::max<int64_t>(rows, 1) : cs, t3.stride(0)};
  }
  Tensor c = t3.contiguous();
  return {c, false, std::max<int64_t>(cols, 1), c.stride(0)};
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  detail::check_defined(a_in, "matmul");
  detail::check_defined(b_in, "matmul");
  const Tensor a = detail::strided(a_in), b = detail::strided(b_in);
  detail::check_same_device(a, b, "matmul");
  TS_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got ",
           a.shape(), " x ", b.shape());
  TS_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: ", a.dtype(), " x ", b.dtype());
  TS_CHECK(is_floating(a.dtype()), "matmul: expected floating-point operands, got ", a.dtype());
  if (a.dim() == 1 && b.dim() == 1) {
    TS_CHECK(a.size(0) == b.size(0), "matmul: inner dimensions differ: ", a.shape(), " x ",
             b.shape());
    return matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  }
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(-2);
  if (b.dim() == 1) return matmul(a, b.unsqueeze(1)).squeeze(-1);

  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  TS_CHECK(b.size(-2) == k, "matmul: inner dimensions differ: ", a.shape(), " x ", b.shape());
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
  const int64_t nbatch = numel(batch);

  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {m, n});
  if (b.dim() == 2 && a.dim() > 2 && a.is_contiguous()) {
    // [..., m, k] @ [k, n]: fold the batch into the rows, one large GEMM.
    return matmul(a.view({nbatch * m, k}), b).view(out_shape);
  }
  Shape a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), {m, k});
  b_full.insert(b_full.end(), {k, n});
  const Tensor a3 = a.expand(a_full).reshape({nbatch, m, k});
  const Tensor b3 = b.expand(b_full).reshape({nbatch, k, n});
  const Operand A = gemm_operand(a3), B = gemm_operand(b3);

  Tensor out = empty(out_shape, a.options());
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();
  GemmArgs g;
  g.trans_a = A.trans;
  g.trans_b = B.trans;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = A.t.raw_data();
  g.b = B.t.raw_data();
  g.c = out.raw_data();
  g.lda = A.ld;
  g.ldb = B.ld;
  g.ldc = n;
  g.batch = nbatch;
  g.stride_a = A.batch_stride;
  g.stride_b = B.batch_stride;
  g.stride_c = m * n;
  g.dtype = a.dtype();
  g.device = a.device();
  backend(a.device()).gemm(g);
  return out;
}

}  // namespace tessera
