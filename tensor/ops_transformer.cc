// The transformer's own layers as ops: layer norm, GELU and embedding, forward and backward.
// Each checks its arguments, brings the operands to the layout its kernels take (contiguous
// rows; per-feature tensors in the compute type) and hands them to the Backend
// (tensor/backend.h); the kernels are tensor/cpu/{layer_norm,gelu,embedding}.cc and their
// CUDA twins.
//
// Layer norm sees any input as rows: [..., n] is [rows, n] with rows = numel / n, which is how
// a GPT's [B, T, C] activations are normalized, one token at a time.
#include <algorithm>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

// A per-feature tensor (layer norm's weight, bias or their gradients) must be [n].
void check_feature_tensor(const Tensor& t, const Tensor& input, const char* op,
                          const char* what) {
  if (!t.defined()) return;
  const int64_t n = input.size(-1);
  TS_CHECK(t.dim() == 1 && t.size(0) == n, op, ": ", what, " has shape ", t.shape(),
           ", expected [", n, "] (the last dim of the input ", input.shape(), ")");
  detail::check_floating(t, op);
  detail::check_same_device(input, t, op);
}

// A per-feature tensor as the kernels take it: contiguous, in the compute type; `fill` (1 for
// the weight, 0 for the bias) where it is undefined, so that the kernels need no branches.
Tensor feature_param(const Tensor& t, int64_t n, const TensorOptions& compute, double fill) {
  if (!t.defined()) return full({n}, fill, compute);
  return t.to(compute).contiguous();
}

TensorOptions compute_options(const Tensor& input) {
  return TensorOptions(detail::compute_dtype(input.dtype())).device(input.device());
}

}  // namespace

LayerNormResult layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           double eps) {
  const char* op = "layer_norm";
  detail::check_defined(input, op);
  detail::check_floating(input, op);
  TS_CHECK(input.dim() >= 1 && input.size(-1) > 0, op,
           ": expected input [..., n] with n > 0, got shape ", input.shape());
  TS_CHECK(eps > 0, op, ": eps must be positive, got ", eps);
  check_feature_tensor(weight, input, op, "weight");
  check_feature_tensor(bias, input, op, "bias");
  const int64_t n = input.size(-1), rows = input.numel() / n;
  const TensorOptions compute = compute_options(input);
  const Tensor x = input.contiguous().view({rows, n});
  LayerNormResult r{empty(input.shape(), input.options()), empty({rows}, compute),
                    empty({rows}, compute)};
  if (rows > 0) {
    backend(input.device())
        .layer_norm(x, feature_param(weight, n, compute, 1.0),
                    feature_param(bias, n, compute, 0.0), eps, r.output.view({rows, n}), r.mean,
                    r.rstd);
  }
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                   const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                   bool need_input, bool need_weight, bool need_bias) {
  const char* op = "layer_norm_backward";
  detail::check_defined(grad_out, op, "grad_out");
  detail::check_defined(input, op);
  TS_CHECK(grad_out.shape() == input.shape(), op, ": grad shape ", grad_out.shape(),
           " differs from input shape ", input.shape());
  detail::check_same_device(input, grad_out, op);
  check_feature_tensor(weight, input, op, "weight");
  const int64_t n = input.size(-1), rows = input.numel() / n;
  TS_CHECK(mean.numel() == rows && rstd.numel() == rows, op, ": mean and rstd have ",
           mean.numel(), " and ", rstd.numel(), " values, expected one per row (", rows, ")");
  const TensorOptions compute = compute_options(input);
  LayerNormGrads grads;
  if (need_input) grads.input = empty(input.shape(), input.options());
  // Zero where there are no rows: a sum over nothing.
  if (need_weight) grads.weight = zeros({n}, compute);
  if (need_bias) grads.bias = zeros({n}, compute);
  if (rows > 0 && (need_input || need_weight || need_bias)) {
    backend(input.device())
        .layer_norm_backward(grad_out.to(input.dtype()).contiguous().view({rows, n}),
                             input.contiguous().view({rows, n}), mean.to(compute).contiguous(),
                             rstd.to(compute).contiguous(), feature_param(weight, n, compute, 1.0),
                             need_input ? grads.input.view({rows, n}) : Tensor(), grads.weight,
                             grads.bias);
  }
  return grads;
}

Tensor gelu(const Tensor& input, GeluApproximate approximate) {
  detail::check_defined(input, "gelu");
  detail::check_floating(input, "gelu");
  const Tensor x = input.contiguous();
  Tensor out = empty(x.shape(), x.options());
  if (x.numel() > 0) backend(x.device()).gelu(x, out, approximate);
  return out;
}

Tensor gelu_backward(const Tensor& grad_out, const Tensor& input, GeluApproximate approximate) {
  const char* op = "gelu_backward";
  detail::check_defined(grad_out, op, "grad_out");
  detail::check_defined(input, op);
  detail::check_floating(input, op);
  detail::check_same_device(input, grad_out, op);
  TS_CHECK(grad_out.shape() == input.shape(), op, ": grad shape ", grad_out.shape(),
           " differs from input shape ", input.shape());
  const Tensor x = input.contiguous();
  Tensor grad_in = empty(x.shape(), x.options());
  if (x.numel() > 0) {
    backend(x.device()).gelu_backward(grad_out.to(x.dtype()).contiguous(), x, grad_in,
                                      approximate);
  }
  return grad_in;
}

namespace {

// The indices as the kernels take them: contiguous i64, every one in [0, num_weights). The range
// is checked with two reductions on the indices' device; only when it fails are the indices
// read on the CPU, to name the first bad one.
Tensor checked_indices(const Tensor& indices, int64_t num_weights, const char* op) {
  TS_CHECK(indices.dtype() == kI64, op, ": indices must be i64 (token ids), got ",
           indices.dtype(), " with shape ", indices.shape());
  const Tensor idx = indices.contiguous();
  if (idx.numel() == 0) return idx;
  const double lo = amin(idx).item(), hi = amax(idx).item();
  if (lo >= 0 && hi < static_cast<double>(num_weights)) return idx;
  const Tensor host = idx.cpu();
  const int64_t* p = host.data<int64_t>();
  const int64_t at = std::find_if(p, p + host.numel(), [num_weights](int64_t i) {
                       return i < 0 || i >= num_weights;
                     }) - p;
  TS_FAIL(op, ": index ", p[at], " (element ", at, " of indices with shape ", indices.shape(),
          ") is out of range for an embedding of V = ", num_weights,
          " rows: indices must be in [0, ", num_weights, ")");
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  const char* op = "embedding";
  detail::check_defined(weight, op, "weight");
  detail::check_floating(weight, op);
  TS_CHECK(weight.dim() == 2, op, ": weight must be [V, C], got shape ", weight.shape());
  detail::check_defined(indices, op, "indices");
  detail::check_same_device(weight, indices, op);
  const Tensor idx = checked_indices(indices, weight.size(0), op);
  Shape shape = idx.shape();
  shape.push_back(weight.size(1));
  Tensor out = empty(shape, weight.options());
  // A gather of rows: index_select's kernels on either device.
  if (out.numel() > 0) {
    backend(weight.device()).index_select(weight.contiguous(), 0, idx.view({-1}),
                                          out.view({idx.numel(), weight.size(1)}));
  }
  return out;
}

Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, int64_t num_weights,
                          DType weight_dtype) {
  const char* op = "embedding_backward";
  detail::check_defined(grad_out, op, "grad_out");
  detail::check_floating(grad_out, op);
  detail::check_defined(indices, op, "indices");
  detail::check_same_device(grad_out, indices, op);
  TS_CHECK(num_weights >= 0, op, ": num_weights must be non-negative, got ", num_weights);
  const Tensor idx = checked_indices(indices, num_weights, op);
  Shape rows_shape = idx.shape();
  TS_CHECK(grad_out.dim() == idx.dim() + 1 &&
               Shape(grad_out.shape().begin(), grad_out.shape().end() - 1) == rows_shape,
           op, ": grad shape ", grad_out.shape(), " does not match indices shape ", idx.shape(),
           " plus the embedding dim");
  const int64_t c = grad_out.size(-1);
  // Rows are added in the compute type (a repeated index in bf16 would round at every
  // addition) and the sum is rounded once to the weight's dtype.
  Tensor grad = zeros({num_weights, c}, compute_options(grad_out));
  if (idx.numel() > 0 && c > 0) {
    backend(grad_out.device())
        .embedding_backward(grad_out.contiguous().view({idx.numel(), c}), idx.view({-1}), grad);
  }
  return grad.to(weight_dtype);
}

bool embedding_rows_addable(const Tensor& grad_weight, const Tensor& grad_out) {
  return grad_weight.defined() && grad_out.defined() && grad_out.dim() >= 1 && grad_weight.dim() == 2 &&
         grad_weight.is_contiguous() && grad_weight.device() == grad_out.device() &&
         grad_weight.dtype() == detail::compute_dtype(grad_out.dtype()) &&
         grad_out.size(-1) == grad_weight.size(1);
}

void embedding_backward_add_(const Tensor& grad_weight, const Tensor& grad_out,
                             const Tensor& indices) {
  const char* op = "embedding_backward_add_";
  detail::check_defined(grad_out, op, "grad_out");
  detail::check_floating(grad_out, op);
  detail::check_defined(indices, op, "indices");
  detail::check_same_device(grad_out, indices, op);
  TS_CHECK(embedding_rows_addable(grad_weight, grad_out), op, ": grad_weight ",
           grad_weight.defined() ? grad_weight.shape() : Shape{}, " (",
           grad_weight.defined() ? dtype_name(grad_weight.dtype()) : "undefined",
           ") must be a contiguous [V, ", grad_out.size(-1), "] tensor in ",
           dtype_name(detail::compute_dtype(grad_out.dtype())), " on ", grad_out.device().str());
  const Tensor idx = checked_indices(indices, grad_weight.size(0), op);
  TS_CHECK(grad_out.dim() == idx.dim() + 1 &&
               Shape(grad_out.shape().begin(), grad_out.shape().end() - 1) == idx.shape(),
           op, ": grad shape ", grad_out.shape(), " does not match indices shape ", idx.shape(),
           " plus the embedding dim");
  const int64_t c = grad_out.size(-1);
  if (idx.numel() > 0 && c > 0) {
    backend(grad_out.device())
        .embedding_backward(grad_out.contiguous().view({idx.numel(), c}), idx.view({-1}), grad_weight);
  }
}

}  // namespace tessera
