// The backward engine: accumulation, shared inputs, retain_graph, no-grad, detach, freeing.
#include "autograd/engine.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

Variable leaf(std::vector<double> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return Variable(from_vector<double>(values, {n}), true);
}

TEST(Engine, ChainRuleThroughSharedInputs) {
  Variable a = leaf({2, 3}), b = leaf({5, 7});
  // y = sum(a * b + a * a): dy/da = b + 2a, dy/db = a
  sum(a * b + a * a).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{9, 13}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{2, 3}));
}

// Sums of gradients run in place only on memory no one else holds. AddBackward hands one
// gradient to both of its inputs; when that shared tensor is the first to reach a, a's later
// sum must not write into it, or b (whose node runs after) would read a's sum. e is recorded
// before c, so c's backward runs first and its gradient is the one a's slot starts from.
TEST(Engine, InPlaceSumsLeaveSharedGradientsAlone) {
  Variable x = leaf({1, 2, 3}), y = leaf({4, 5, 6});
  const Variable w1 = Variable(from_vector<double>({1, -2, 3}, {3}), false);
  const Variable w2 = Variable(from_vector<double>({0.5, 4, -1}, {3}), false);
  const Variable a = x * 2.0, b = y * 5.0;
  const Variable e = a * 3.0;
  const Variable c = a + b;
  (sum(c * w1) + sum(e * w2)).backward();
  // dx = 2 * (w1 + 3 * w2), dy = 5 * w1
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 20, 0}));
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{5, -10, 15}));
}

// ... nor into a gradient whose elements share one address: SumBackward hands back its scalar
// gradient expanded to the input's shape. q is recorded after p, so its gradient reaches x
// first; summing p's into that view in place would give every element one value.
TEST(Engine, InPlaceSumsLeaveExpandedGradientsAlone) {
  Variable x = leaf({1, 2, 3});
  const Variable w = Variable(from_vector<double>({4, -5, 6}, {3}), false);
  const Variable p = sum(x * w);
  const Variable q = sum(x) * 0.5;
  (p + q).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{4.5, -4.5, 6.5}));  // w + 0.5
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Variable a = leaf({1, 2});
  sum(a * 3.0).backward();
  sum(a * 4.0).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{7, 7}));
  a.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Variable a = leaf({1, 2});
  Variable y = sum(exp(a));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(a.grad().at({1}), 2 * std::exp(2.0), 1e-12);
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a second time"), std::string::npos) << e.what();
  }
}

TEST(Engine, ExplicitGradientAndErrors) {
  Variable a = leaf({1, 2, 3});
  Variable y = a * 2.0;
  EXPECT_THROW(y.backward(), Error);  // non-scalar needs a gradient
  EXPECT_THROW(y.backward(ones({2}, kF64)), Error);
  y.backward(from_vector<double>({1, 10, 100}, {3}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{2, 20, 200}));
  EXPECT_THROW(Variable(ones({2})).backward(), Error);  // nothing requires grad
}

TEST(Engine, NoGradAndDetach) {
  Variable a = leaf({1, 2});
  {
    NoGradGuard no_grad;
    Variable y = a * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
  }
  Variable d = a.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data().storage(), a.data().storage());
  sum(a * d).backward();  // d is a constant
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_THROW(Variable(ones({2}, kI64), true), Error);
}

TEST(Engine, GradientsOfBroadcastInputsAreSummed) {
  Variable a(ones({3, 1}, kF64), true), b(ones({4}, kF64), true);
  sum(a + b).backward();
  EXPECT_EQ(a.grad().shape(), (Shape{3, 1}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{3, 3, 3, 3}));
}

TEST(Engine, DroppingTheLossFreesTheGraph) {
  Variable w = leaf({1, 2});
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  std::weak_ptr<Node> node;
  {
    Variable big(ones({1 << 16}, kF64));
    Variable loss = sum(exp(big) * sum(w));  // saves a 512 KiB tensor
    node = loss.grad_fn();
    EXPECT_GT(memory_stats(Device::cpu()).current_bytes, before + (1 << 19));
  }
  EXPECT_TRUE(node.expired());
  EXPECT_EQ(memory_stats(Device::cpu()).current_bytes, before);
}

TEST(Engine, BackwardFreesSavedTensorsAsItGoes) {
  Variable w = leaf({1});
  Variable big(ones({1 << 16}, kF64));
  Variable loss = sum(exp(big * w));
  const int64_t during = memory_stats(Device::cpu()).current_bytes;
  loss.backward();
  // exp's saved output and mul's saved operand are released once their nodes have run.
  EXPECT_LT(memory_stats(Device::cpu()).current_bytes, during);
}

TEST(Engine, MultipleRoots) {
  Variable a = leaf({1, 2});
  Variable y1 = sum(a * 2.0), y2 = sum(a * a);
  backward({y1, y2});
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{4, 6}));
}

}  // namespace
}  // namespace tessera
