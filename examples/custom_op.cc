// A differentiable op of your own: compute the result on Tensors, then record() its backward.
// gradcheck compares that backward with finite differences.
//
//   bazel run -c opt //examples:custom_op
#include <cstdio>

#include "tessera.h"

using namespace tessera;

// softplus(x) = log(1 + exp(x)); d/dx = sigmoid(x).
Variable softplus(const Variable& x) {
  const Tensor y = log(add(exp(x.data()), 1.0));
  // The lambda is the backward: gradient of the result in, one gradient per input out. What it
  // captures is what the op saves (here the input, as a Variable).
  return record("SoftplusBackward", y, {x}, [x](const Tensor& grad) -> Grads {
    return {mul(grad, sigmoid(x.data()))};
  });
}

// A two-input op: x * w + b with w broadcast along rows.
Variable scale_shift(const Variable& x, const Variable& w, const Variable& b) {
  const Tensor y = add(mul(x.data(), w.data()), b.data());
  return record("ScaleShiftBackward", y, {x, w, b}, [x, w](const Tensor& grad) -> Grads {
    return {mul(grad, w.data()), sum(mul(grad, x.data()), {0}), sum(grad, {0})};
  });
}

int main() {
  Generator gen(0);
  const GradcheckResult one =
      gradcheck([](const std::vector<Variable>& in) { return softplus(in[0]); },
                {randn({4, 3}, kF64, &gen)});
  const GradcheckResult three = gradcheck(
      [](const std::vector<Variable>& in) { return scale_shift(in[0], in[1], in[2]); },
      {randn({5, 3}, kF64, &gen), randn({3}, kF64, &gen), randn({3}, kF64, &gen)});
  std::printf("softplus: %s (max error %.2e)\n", one.ok ? "ok" : one.message.c_str(), one.max_abs_error);
  std::printf("scale_shift: %s (max error %.2e)\n", three.ok ? "ok" : three.message.c_str(), three.max_abs_error);

  // Used like any op: the backward flows through it.
  Variable w(ones({3}), /*requires_grad=*/true);
  Variable loss = sum(softplus(scale_shift(Variable(randn({2, 3}, kF32, &gen)), w, Variable(zeros({3})))));
  loss.backward();
  std::printf("loss %.4f, grad of w %s\n", loss.item(), shape_str(w.grad().shape()).c_str());
  return one.ok && three.ok ? 0 : 1;
}
