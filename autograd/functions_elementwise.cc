// Differentiable elementwise ops.
#include "autograd/autocast.h"
#include "autograd/custom_op.h"
#include "autograd/functions.h"
#include "autograd/functions_util.h"

namespace tessera {

using detail::InputMeta;
using detail::meta;
using detail::reduce_to;

Variable add(const Variable& a_in, const Variable& b_in) {
  const auto in = autocast_args("add", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  return record("AddBackward", add(a.data(), b.data()), {a, b},
                [ma = meta(a), mb = meta(b)](const Tensor& g) -> Grads {
                  return {reduce_to(g, ma), reduce_to(g, mb)};
                });
}

Variable sub(const Variable& a_in, const Variable& b_in) {
  const auto in = autocast_args("sub", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  return record("SubBackward", sub(a.data(), b.data()), {a, b},
                [ma = meta(a), mb = meta(b)](const Tensor& g) -> Grads {
                  return {reduce_to(g, ma), mb.needs_grad ? reduce_to(neg(g), mb) : Tensor()};
                });
}

Variable mul(const Variable& a_in, const Variable& b_in) {
  const auto in = autocast_args("mul", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  // Saves the operand Tensors each gradient needs: dA = g * b, dB = g * a.
  const Tensor sa = b.requires_grad() ? a.data() : Tensor();
  const Tensor sb = a.requires_grad() ? b.data() : Tensor();
  return record("MulBackward", mul(a.data(), b.data()), {a, b},
                [ma = meta(a), mb = meta(b), sa, sb](const Tensor& g) -> Grads {
                  return {sb.defined() ? reduce_to(mul(g, sb), ma) : Tensor(),
                          sa.defined() ? reduce_to(mul(g, sa), mb) : Tensor()};
                });
}

Variable div(const Variable& a_in, const Variable& b_in) {
  const auto in = autocast_args("div", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  const Tensor out = div(a.data(), b.data());
  const Tensor denominator = b.data();
  return record("DivBackward", out, {a, b},
                [ma = meta(a), mb = meta(b), out, denominator](const Tensor& g) -> Grads {
                  // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2, so dB = -(g/b) * out.
                  const Tensor ga = div(g, denominator);
                  return {reduce_to(ga, ma),
                          mb.needs_grad ? reduce_to(neg(mul(ga, out)), mb) : Tensor()};
                });
}

namespace {
// max/min: the gradient goes to the larger (smaller) input, split evenly on ties.
Variable extremum(const Variable& a_in, const Variable& b_in, bool is_max) {
  const auto in = autocast_args(is_max ? "maximum" : "minimum", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  const Tensor x = a.data(), y = b.data();
  const Tensor out = is_max ? maximum(x, y) : minimum(x, y);
  return record(is_max ? "MaximumBackward" : "MinimumBackward", out, {a, b},
                [ma = meta(a), mb = meta(b), x, y, is_max](const Tensor& g) -> Grads {
                  const Tensor wins = is_max ? gt(x, y) : lt(x, y);
                  const Tensor ties = eq(x, y);
                  const Tensor share_a = add(wins.to(g.dtype()), mul(ties.to(g.dtype()), 0.5));
                  const Tensor ga = mul(g, share_a);
                  return {reduce_to(ga, ma), reduce_to(sub(g, ga), mb)};
                });
}
}  // namespace

Variable maximum(const Variable& a, const Variable& b) { return extremum(a, b, true); }
Variable minimum(const Variable& a, const Variable& b) { return extremum(a, b, false); }

Variable add(const Variable& a, double b) {
  return record("AddScalarBackward", add(a.data(), b), {a},
                [](const Tensor& g) -> Grads { return {g}; });
}

Variable mul(const Variable& a, double b) {
  return record("MulScalarBackward", mul(a.data(), b), {a},
                [b](const Tensor& g) -> Grads { return {mul(g, b)}; });
}

Variable pow(const Variable& a_in, double exponent) {
  const Variable a = autocast_args("pow", a_in)[0];
  const Tensor x = a.data();
  return record("PowBackward", pow(x, exponent), {a}, [x, exponent](const Tensor& g) -> Grads {
    if (exponent == 0) return {zeros_like(g)};
    return {mul(g, mul(pow(x, exponent - 1), exponent))};
  });
}

Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
Variable operator+(const Variable& a, double b) { return add(a, b); }
Variable operator-(const Variable& a, double b) { return add(a, -b); }
Variable operator*(const Variable& a, double b) { return mul(a, b); }
Variable operator/(const Variable& a, double b) { return mul(a, 1.0 / b); }
Variable operator+(double a, const Variable& b) { return add(b, a); }
Variable operator-(double a, const Variable& b) { return add(neg(b), a); }
Variable operator*(double a, const Variable& b) { return mul(b, a); }
Variable operator/(double a, const Variable& b) { return mul(pow(b, -1.0), a); }
Variable operator-(const Variable& a) { return neg(a); }

Variable neg(const Variable& a) {
  return record("NegBackward", neg(a.data()), {a}, [](const Tensor& g) -> Grads { return {neg(g)}; });
}

Variable abs(const Variable& a) {
  const Tensor x = a.data();
  return record("AbsBackward", abs(x), {a},
                [x](const Tensor& g) -> Grads { return {mul(g, sign(x))}; });
}

Variable exp(const Variable& a_in) {
  const Variable a = autocast_args("exp", a_in)[0];
  const Tensor y = exp(a.data());
  return record("ExpBackward", y, {a}, [y](const Tensor& g) -> Grads { return {mul(g, y)}; });
}

Variable log(const Variable& a_in) {
  const Variable a = autocast_args("log", a_in)[0];
  const Tensor x = a.data();
  return record("LogBackward", log(x), {a}, [x](const Tensor& g) -> Grads { return {div(g, x)}; });
}

Variable sqrt(const Variable& a) {
  const Tensor y = sqrt(a.data());
  return record("SqrtBackward", y, {a},
                [y](const Tensor& g) -> Grads { return {div(g, mul(y, 2.0))}; });
}

Variable square(const Variable& a) {
  const Tensor x = a.data();
  return record("SquareBackward", square(x), {a},
                [x](const Tensor& g) -> Grads { return {mul(g, mul(x, 2.0))}; });
}

Variable tanh(const Variable& a) {
  const Tensor y = tanh(a.data());
  return record("TanhBackward", y, {a},
                [y](const Tensor& g) -> Grads { return {tanh_backward(g, y)}; });
}

Variable sigmoid(const Variable& a) {
  const Tensor y = sigmoid(a.data());
  return record("SigmoidBackward", y, {a},
                [y](const Tensor& g) -> Grads { return {sigmoid_backward(g, y)}; });
}

Variable relu(const Variable& a) {
  // The output is positive exactly where the input is, so it serves as the mask.
  const Tensor y = relu(a.data());
  return record("ReluBackward", y, {a},
                [y](const Tensor& g) -> Grads { return {relu_backward(g, y)}; });
}

Variable clamp(const Variable& a, double low, double high) {
  const Tensor x = a.data();
  return record("ClampBackward", clamp(x, low, high), {a}, [x, low, high](const Tensor& g) -> Grads {
    const Tensor inside = mul(ge(x, low).to(g.dtype()), le(x, high).to(g.dtype()));
    return {mul(g, inside)};
  });
}

Variable where(const Tensor& cond, const Variable& a_in, const Variable& b_in) {
  const auto in = autocast_args("where", a_in, b_in);
  const Variable &a = in[0], &b = in[1];
  return record("WhereBackward", where(cond, a.data(), b.data()), {a, b},
                [cond, ma = meta(a), mb = meta(b)](const Tensor& g) -> Grads {
                  const Tensor zero = zeros({}, g.options());
                  return {ma.needs_grad ? reduce_to(where(cond, g, zero), ma) : Tensor(),
                          mb.needs_grad ? reduce_to(where(cond, zero, g), mb) : Tensor()};
                });
}

}  // namespace tessera
