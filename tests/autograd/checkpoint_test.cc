// Activation checkpointing: same gradients as the plain graph, less memory held between
// forward and backward, dropout masks replayed.
#include "autograd/checkpoint.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

struct Block {
  Variable w1, w2;
  Variable operator()(const Variable& x) const {
    return tanh(linear(dropout(tanh(linear(x, w1, Variable())), 0.3, true), w2, Variable()));
  }
};

Block make_block(int64_t width) {
  Generator g(1);
  return {Variable(randn({width, width}, kF64, &g), true),
          Variable(randn({width, width}, kF64, &g), true)};
}

TEST(Checkpoint, GradientsMatchThePlainGraph) {
  Block block = make_block(8);
  Generator g(2);
  const Tensor input = randn({4, 8}, kF64, &g);

  manual_seed(11);
  Variable x1(input.clone(), true);
  sum(square(block(x1))).backward();
  const Tensor gw1 = block.w1.grad().clone(), gw2 = block.w2.grad().clone();
  const Tensor gx = x1.grad().clone();
  block.w1.zero_grad();
  block.w2.zero_grad();

  manual_seed(11);  // the same dropout mask must be drawn, and redrawn in the recompute
  Variable x2(input.clone(), true);
  Variable y = checkpoint([&block](const Variable& v) { return block(v); }, x2);
  sum(square(y)).backward();
  EXPECT_LT(max_abs_diff(x2.grad(), gx), 1e-12);
  EXPECT_LT(max_abs_diff(block.w1.grad(), gw1), 1e-12);
  EXPECT_LT(max_abs_diff(block.w2.grad(), gw2), 1e-12);
}

TEST(Checkpoint, ParametersGetGradientsEvenWhenTheInputNeedsNone) {
  Block block = make_block(4);
  Variable x(ones({2, 4}, kF64));
  sum(checkpoint([&block](const Variable& v) { return block(v); }, x)).backward();
  EXPECT_TRUE(block.w1.grad().defined());
}

TEST(Checkpoint, HoldsLessMemoryBetweenForwardAndBackward) {
  Block block = make_block(256);
  Variable x(ones({512, 256}, kF64), true);
  const Device cpu = Device::cpu();
  auto held_after_forward = [&](bool use_checkpoint) {
    const int64_t before = memory_stats(cpu).current_bytes;
    Variable y = use_checkpoint ? checkpoint([&block](const Variable& v) { return block(v); }, x)
                                : block(x);
    const int64_t held = memory_stats(cpu).current_bytes - before;
    sum(y).backward();
    return held;
  };
  const int64_t plain = held_after_forward(false);
  const int64_t checkpointed = held_after_forward(true);
  // Plain keeps 4 activations of 1 MiB (two linear outputs' tanh, the mask, the dropout output)
  // plus the result; checkpointing keeps only the result.
  EXPECT_LT(checkpointed * 3, plain);
}

}  // namespace
}  // namespace tessera
