// recompute_output (autograd/recompute.h): the gradients of the plain graph, the recomputed
// output's bytes freed between forward and backward, and clear errors where freeing would be
// wrong.
#include "autograd/recompute.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

// fn = dropout(tanh(x w1)) (a parameter and the random stream inside), consumer = its product
// with w2 (which keeps its input, fn's output).
struct Layers {
  Variable w1, w2;
  UnaryFn fn() const {
    return [w1 = w1](const Variable& x) { return dropout(tanh(linear(x, w1, Variable())), 0.5, true); };
  }
  UnaryFn consumer() const {
    return [w2 = w2](const Variable& y) { return linear(y, w2, Variable()); };
  }
};

Layers make_layers(int64_t width) {
  Generator g(1);
  return {Variable(randn({width, width}, kF64, &g), true),
          Variable(randn({width, width}, kF64, &g), true)};
}

struct Grads {
  Tensor x, w1, w2;
};

Grads run(const Layers& l, const Tensor& input, bool recompute, bool twice = false) {
  l.w1.zero_grad();
  l.w2.zero_grad();
  manual_seed(5);  // the same dropout mask first, and again when fn is recomputed
  Variable x(input.clone(), true);
  const Variable z = recompute ? recompute_output(l.fn(), x, l.consumer())
                               : l.consumer()(l.fn()(x));
  const Variable loss = sum(square(z));
  loss.backward(Tensor(), /*retain_graph=*/twice);
  if (twice) loss.backward();  // the graph again: fn recomputed a second time
  return {x.grad().clone(), l.w1.grad().clone(), l.w2.grad().clone()};
}

TEST(RecomputeOutput, GradientsMatchThePlainGraph) {
  const Layers l = make_layers(16);
  Generator g(2);
  const Tensor input = randn({8, 16}, kF64, &g);
  for (bool twice : {false, true}) {
    SCOPED_TRACE(twice ? "two backwards" : "one backward");
    const Grads plain = run(l, input, false, twice), recomputed = run(l, input, true, twice);
    EXPECT_EQ(max_abs_diff(plain.x, recomputed.x), 0.0);
    EXPECT_EQ(max_abs_diff(plain.w1, recomputed.w1), 0.0);  // the parameter inside fn
    EXPECT_EQ(max_abs_diff(plain.w2, recomputed.w2), 0.0);
  }
}

TEST(RecomputeOutput, FnsOutputIsFreedUntilBackward) {
  const Layers l = make_layers(64);
  Generator g(2);
  Variable x(randn({256, 64}, kF64, &g), true);
  const Device cpu = Device::cpu();
  const int64_t y_bytes = 256 * 64 * 8;
  int64_t plain = 0, recomputed = 0;
  for (bool recompute : {false, true}) {
    const int64_t before = memory_stats(cpu).current_bytes;
    const Variable z = recompute ? recompute_output(l.fn(), x, l.consumer())
                                 : l.consumer()(l.fn()(x));
    (recompute ? recomputed : plain) = memory_stats(cpu).current_bytes - before;
    sum(z).backward();
  }
  // Plain keeps tanh's output, dropout's mask and output, and z; recomputed keeps only z.
  EXPECT_EQ(recomputed, y_bytes);
  EXPECT_GE(plain - recomputed, 2 * y_bytes);
}

TEST(RecomputeOutput, WithoutGradModeItIsTheComposition) {
  const Layers l = make_layers(4);
  Generator g(3);
  const Tensor input = randn({2, 4}, kF64, &g);
  NoGradGuard no_grad;
  manual_seed(5);
  const Tensor a = recompute_output(l.fn(), Variable(input), l.consumer()).data();
  manual_seed(5);
  const Tensor b = l.consumer()(l.fn()(Variable(input))).data();
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
}

TEST(RecomputeOutput, RefusesWhatFreeingWouldBreak) {
  Variable x(ones({3, 4}, kF64), true);
  const UnaryFn view = [](const Variable& v) { return reshape(v, {4, 3}); };
  const UnaryFn exp_fn = [](const Variable& v) { return exp(v); };
  const UnaryFn identity = [](const Variable& v) { return reshape(v, {12}); };
  try {
    recompute_output(view, x, exp_fn);
    ADD_FAILURE() << "no error for a view of the input";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("fn returned a view of its input (shape [3, 4])"),
              std::string::npos)
        << e.what();
  }
  try {
    recompute_output(exp_fn, x, identity);
    ADD_FAILURE() << "no error for a consumer returning a view";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the consumer's output shares the recomputed output's "
                                         "storage (shape [12])"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera
