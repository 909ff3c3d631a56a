// Differentiable reductions: the gradient of a reduced element is spread back over the
// elements it summarized.
#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"

namespace tessera {

namespace {

// The shape `input` has after reducing `dims` with keepdim = true.
Shape kept_shape(const Shape& input, const Shape& dims) {
  Shape kept = input;
  if (dims.empty()) {
    for (int64_t& s : kept) s = 1;
  }
  for (int64_t d : dims) kept[wrap_dim(d, static_cast<int64_t>(input.size()), "reduce")] = 1;
  return kept;
}

// The reduced gradient broadcast back over the input.
Tensor expand_back(const Tensor& g, const Shape& input, const Shape& dims) {
  return g.reshape(kept_shape(input, dims)).expand(input);
}

int64_t reduced_count(const Shape& input, const Shape& dims) {
  return numel(input) / std::max<int64_t>(numel(kept_shape(input, dims)), 1);
}

Variable extreme(const Variable& a, const Shape& dims, bool keepdim, bool is_max) {
  const Tensor x = a.data();
  const Tensor kept = is_max ? amax(x, dims, true) : amin(x, dims, true);
  Tensor out = keepdim ? kept : kept.reshape(is_max ? amax(x, dims, false).shape()
                                                    : amin(x, dims, false).shape());
  return record(is_max ? "AmaxBackward" : "AminBackward", out, {a},
                [x, kept, dims](const Tensor& g) -> Grads {
                  const Tensor mask = eq(x, kept).to(g.dtype());
                  const Tensor count = sum(mask, dims, true);
                  return {div(mul(expand_back(g, x.shape(), dims), mask), count)};
                });
}

}  // namespace

Variable sum(const Variable& a_in, const Shape& dims, bool keepdim) {
  const Variable a = autocast_args("sum", a_in)[0];
  const Shape input = a.shape();
  return record("SumBackward", sum(a.data(), dims, keepdim), {a},
                [input, dims](const Tensor& g) -> Grads { return {expand_back(g, input, dims)}; });
}

Variable mean(const Variable& a_in, const Shape& dims, bool keepdim) {
  const Variable a = autocast_args("mean", a_in)[0];
  const Shape input = a.shape();
  return record("MeanBackward", mean(a.data(), dims, keepdim), {a},
                [input, dims](const Tensor& g) -> Grads {
                  const double n = static_cast<double>(reduced_count(input, dims));
                  return {div(expand_back(g, input, dims), n)};
                });
}

Variable var(const Variable& a_in, const Shape& dims, int64_t correction, bool keepdim) {
  const Variable a = autocast_args("var", a_in)[0];
  const Tensor x = a.data();
  return record("VarBackward", var(x, dims, correction, keepdim), {a},
                [x, dims, correction](const Tensor& g) -> Grads {
                  // d var / dx_i = 2 (x_i - mean) / (n - correction)
                  const double n = static_cast<double>(reduced_count(x.shape(), dims));
                  const Tensor centered = sub(x, mean(x, dims, true));
                  return {mul(expand_back(g, x.shape(), dims),
                              mul(centered, 2.0 / (n - static_cast<double>(correction))))};
                });
}

Variable amax(const Variable& a, const Shape& dims, bool keepdim) {
  return extreme(a, dims, keepdim, true);
}

Variable amin(const Variable& a, const Shape& dims, bool keepdim) {
  return extreme(a, dims, keepdim, false);
}

}  // namespace tessera
