// Elementwise ops: broadcasting and dtype promotion here, arithmetic in the Backend.
#include <cmath>
#include <optional>

#include "tensor/backend.h"
#include "tensor/ops.h"
#include "tensor/ops_util.h"

namespace tessera {

namespace {

bool is_comparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEq: case BinaryOp::kNe: case BinaryOp::kLt:
    case BinaryOp::kLe: case BinaryOp::kGt: case BinaryOp::kGe:
      return true;
    default:
      return false;
  }
}

// Channels-last operands (tensor.h's MemoryFormat) give a channels-last result, as in PyTorch:
// when every operand is NHWC the kernel runs over their storage as one flat run.
using detail::is_nhwc;
Tensor flat(const Tensor& t) { return Tensor(t.storage(), {t.numel()}, {1}, t.offset(), t.dtype()); }

// b converted to dtype and broadcast to shape. A channels-blocked b (no strides to broadcast
// with) stays as it is where it has the shape already, else is converted to NCHW first.
Tensor expanded(const Tensor& b, DType dtype, const Shape& shape) {
  Tensor t = b.to(dtype);
  if (t.is_channels_blocked()) {
    if (t.shape() == shape) return t;
    t = t.contiguous();
  }
  return t.expand(shape);
}

// A channels-blocked operand of the result's shape gives a channels-blocked result (nChw16c),
// computed over every operand's channel_blocks() view: the same positions element for element
// whatever each operand's layout, broadcast ones included (stride-0 views).
std::optional<Tensor> binary_blocked(BinaryOp op, const Tensor& a, const Tensor& b,
                                     const Shape& shape, DType dtype,
                                     const TensorOptions& options) {
  const auto blocked = [&](const Tensor& t) { return t.is_channels_blocked() && t.shape() == shape; };
  if (!blocked(a) && !blocked(b)) return std::nullopt;
  Tensor out = empty(shape, options, MemoryFormat::kChannelsBlocked);
  backend(a.device())
      .binary(op, expanded(a, dtype, shape).channel_blocks(),
              expanded(b, dtype, shape).channel_blocks(), out.channel_blocks());
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  detail::check_defined(a, name, "first operand");
  detail::check_defined(b, name, "second operand");
  detail::check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  DType dtype = promote_types(a.dtype(), b.dtype());
  if ((op == BinaryOp::kDiv || op == BinaryOp::kPow) && !is_floating(dtype)) dtype = kF32;
  const TensorOptions options = TensorOptions(is_comparison(op) ? kBool : dtype).device(a.device());
  if (auto out = binary_blocked(op, a, b, shape, dtype, options)) return *out;
  const Tensor ax = expanded(a, dtype, shape), bx = expanded(b, dtype, shape);
  if (is_nhwc(ax) && is_nhwc(bx)) {
    Tensor out = empty(shape, options, MemoryFormat::kChannelsLast);
    backend(a.device()).binary(op, flat(ax), flat(bx), flat(out));
    return out;
  }
  Tensor out = empty(shape, options);
  backend(a.device()).binary(op, ax, bx, out);
  return out;
}

// A 0-dim tensor holding a Python-style scalar operand: the tensor's dtype, unless the tensor
// is integral and the scalar is not, in which case f32 (so 3 * 0.5 is not truncated).
Tensor scalar_operand(const Tensor& like, double value) {
  DType dtype = like.dtype();
  if (!is_floating(dtype) && value != std::floor(value)) dtype = kF32;
  return scalar_tensor(value, TensorOptions(dtype).device(like.device()));
}

Tensor binary(BinaryOp op, const Tensor& a, double b, const char* name) {
  detail::check_defined(a, name);
  return binary(op, a, scalar_operand(a, b), name);
}

Tensor unary(UnaryOp op, const Tensor& a, const char* name, double alpha = 0, double beta = 0) {
  detail::check_defined(a, name);
  const bool needs_float = op != UnaryOp::kNeg && op != UnaryOp::kAbs && op != UnaryOp::kRelu &&
                           op != UnaryOp::kSign && op != UnaryOp::kSquare &&
                           op != UnaryOp::kClamp;
  const Tensor in = needs_float && !is_floating(a.dtype()) ? a.to(kF32) : a;
  if (in.is_channels_blocked()) {
    Tensor out = empty(in.shape(), in.options(), MemoryFormat::kChannelsBlocked);
    backend(in.device()).unary(op, flat(in), flat(out), alpha, beta);
    return out;
  }
  if (is_nhwc(in)) {
    Tensor out = empty(in.shape(), in.options(), MemoryFormat::kChannelsLast);
    backend(in.device()).unary(op, flat(in), flat(out), alpha, beta);
    return out;
  }
  Tensor out = empty(in.shape(), in.options());
  backend(in.device()).unary(op, in, out, alpha, beta);
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kAdd, a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kSub, a, b, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMul, a, b, "mul"); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kDiv, a, b, "div"); }
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kMaximum, a, b, "maximum");
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kMinimum, a, b, "minimum");
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kPow, a, b, "pow"); }
Tensor add(const Tensor& a, double b) { return binary(BinaryOp::kAdd, a, b, "add"); }
Tensor sub(const Tensor& a, double b) { return binary(BinaryOp::kSub, a, b, "sub"); }
Tensor mul(const Tensor& a, double b) { return binary(BinaryOp::kMul, a, b, "mul"); }
Tensor div(const Tensor& a, double b) { return binary(BinaryOp::kDiv, a, b, "div"); }
Tensor pow(const Tensor& a, double e) { return binary(BinaryOp::kPow, a, e, "pow"); }
Tensor maximum(const Tensor& a, double b) { return binary(BinaryOp::kMaximum, a, b, "maximum"); }
Tensor minimum(const Tensor& a, double b) { return binary(BinaryOp::kMinimum, a, b, "minimum"); }

Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kEq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kNe, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kLt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kLe, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kGt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kGe, a, b, "ge"); }
Tensor eq(const Tensor& a, double b) { return binary(BinaryOp::kEq, a, b, "eq"); }
Tensor ne(const Tensor& a, double b) { return binary(BinaryOp::kNe, a, b, "ne"); }
Tensor lt(const Tensor& a, double b) { return binary(BinaryOp::kLt, a, b, "lt"); }
Tensor le(const Tensor& a, double b) { return binary(BinaryOp::kLe, a, b, "le"); }
Tensor gt(const Tensor& a, double b) { return binary(BinaryOp::kGt, a, b, "gt"); }
Tensor ge(const Tensor& a, double b) { return binary(BinaryOp::kGe, a, b, "ge"); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return binary(BinaryOp::kSub, scalar_operand(b, a), b, "sub"); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return binary(BinaryOp::kDiv, scalar_operand(b, a), b, "div"); }
Tensor operator-(const Tensor& a) { return neg(a); }

namespace {
// a = a op b in place (b has a's shape and dtype). Elementwise kernels read index i before
// writing index i, so out may alias an input. A channels-blocked a is written over its memory as
// its channel_blocks(), b seen the same way. A channels-last a is written over its memory as
// one flat run, bx brought to the same layout (a backend call takes one layout; a copy back
// from a fresh result cost a pass of its own); any other strided a, or a bx that overlaps a
// elsewhere in its memory, goes through a copy.
void binary_in_place(BinaryOp op, Tensor& a, const Tensor& b, const char* name) {
  const bool overlaps = b.storage() == a.storage() && !b.is_same(a);
  if (a.is_channels_blocked() && !overlaps) {
    const Tensor ab = a.channel_blocks();
    return backend(a.device()).binary(op, ab, b.channel_blocks(), ab);
  }
  // A channels-blocked b into a strided a: b read as NCHW.
  const Tensor bx = b.is_channels_blocked() ? b.contiguous() : b;
  if (a.is_contiguous() && !overlaps) return backend(a.device()).binary(op, a, bx, a);
  if (a.is_channels_last() && !overlaps) {
    const Tensor af = flat(a);
    return backend(a.device())
        .binary(op, af, flat(bx.contiguous(MemoryFormat::kChannelsLast)), af);
  }
  a.copy_(binary(op, a, bx, name));
}
}  // namespace

Tensor& add_(Tensor& a, const Tensor& b, double alpha) {
  detail::check_defined(a, "add_");
  detail::check_defined(b, "add_");
  detail::check_same_device(a, b, "add_");
  const Tensor scaled = alpha == 1.0 ? b : mul(b, alpha);
  binary_in_place(BinaryOp::kAdd, a, expanded(scaled, a.dtype(), a.shape()), "add_");
  return a;
}

Tensor& mul_(Tensor& a, const Tensor& b) {
  detail::check_defined(a, "mul_");
  detail::check_defined(b, "mul_");
  detail::check_same_device(a, b, "mul_");
  binary_in_place(BinaryOp::kMul, a, expanded(b, a.dtype(), a.shape()), "mul_");
  return a;
}

Tensor& mul_(Tensor& a, double b) { return mul_(a, scalar_tensor(b, a.options())); }

Tensor neg(const Tensor& a) { return unary(UnaryOp::kNeg, a, "neg"); }
Tensor abs(const Tensor& a) { return unary(UnaryOp::kAbs, a, "abs"); }
Tensor exp(const Tensor& a) { return unary(UnaryOp::kExp, a, "exp"); }
Tensor log(const Tensor& a) { return unary(UnaryOp::kLog, a, "log"); }
Tensor sqrt(const Tensor& a) { return unary(UnaryOp::kSqrt, a, "sqrt"); }
Tensor rsqrt(const Tensor& a) { return unary(UnaryOp::kRsqrt, a, "rsqrt"); }
Tensor tanh(const Tensor& a) { return unary(UnaryOp::kTanh, a, "tanh"); }
Tensor sigmoid(const Tensor& a) { return unary(UnaryOp::kSigmoid, a, "sigmoid"); }
Tensor relu(const Tensor& a) { return unary(UnaryOp::kRelu, a, "relu"); }
Tensor sign(const Tensor& a) { return unary(UnaryOp::kSign, a, "sign"); }
Tensor square(const Tensor& a) { return unary(UnaryOp::kSquare, a, "square"); }
Tensor reciprocal(const Tensor& a) { return unary(UnaryOp::kReciprocal, a, "reciprocal"); }
Tensor clamp(const Tensor& a, double low, double high) {
  TS_CHECK(!(low > high), "clamp: low ", low, " > high ", high);
  return unary(UnaryOp::kClamp, a, "clamp", low, high);
}

Tensor relu_backward(const Tensor& grad, const Tensor& input) {
  return binary(BinaryOp::kReluBackward, grad, input, "relu_backward");
}
Tensor sigmoid_backward(const Tensor& grad, const Tensor& output) {
  return binary(BinaryOp::kSigmoidBackward, grad, output, "sigmoid_backward");
}
Tensor tanh_backward(const Tensor& grad, const Tensor& output) {
  return binary(BinaryOp::kTanhBackward, grad, output, "tanh_backward");
}

Tensor where(const Tensor& cond_in, const Tensor& a_in, const Tensor& b_in) {
  const Tensor cond = detail::strided(cond_in), a = detail::strided(a_in),
               b = detail::strided(b_in);
  detail::check_defined(cond, "where", "condition");
  detail::check_defined(a, "where");
  detail::check_defined(b, "where");
  detail::check_same_device(cond, a, "where");
  detail::check_same_device(a, b, "where");
  TS_CHECK(cond.dtype() == kBool, "where: condition must be bool, got ", cond.dtype());
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"),
                                       b.shape(), "where");
  const DType dtype = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, TensorOptions(dtype).device(a.device()));
  backend(a.device()).where(cond.expand(shape), a.to(dtype).expand(shape),
                            b.to(dtype).expand(shape), out);
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.shape() == b.shape(), "max_abs_diff: shapes differ: ", a.shape(), " vs ", b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]);
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) return false;
  }
  return true;
}

}  // namespace tessera
