// A backward split into B (input gradients) then W (weight gradients) gives the ordinary
// backward's gradients bit for bit: an MLP, a ResNet-20 (convolutions, batch norm, residual
// adds), under bf16 and f16 autocast (the weights reach the layers through casts), with
// activation checkpointing, and over two micro-batches accumulated in either W order. After B
// alone the split layers' weights have no gradient and the input has its final one; grad-ready
// hooks fire in W; callbacks queued in B run after the last W; with defer_leaves every
// parameter's gradient waits for W.
#include "autograd/weight_grad.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "models/resnet.h"
#include "models/simple.h"
#include "nn/linear.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace {

using Model = std::shared_ptr<nn::Sequential>;

struct Result {
  std::vector<Tensor> grads;  // per parameter (undefined: none)
  Tensor input_grad;
};

Result grads_of(const Model& m, const Variable& x) {
  Result r;
  for (const Variable& p : m->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  r.input_grad = x.grad().defined() ? x.grad().clone() : Tensor();
  return r;
}

void expect_identical(const Result& a, const Result& b, const Model& m) {
  ASSERT_EQ(a.grads.size(), b.grads.size());
  const std::vector<Variable> ps = m->parameters();
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_TRUE(a.grads[i].defined() && b.grads[i].defined()) << ps[i].name();
    EXPECT_EQ(max_abs_diff(a.grads[i], b.grads[i]), 0.0) << ps[i].name();
  }
  ASSERT_TRUE(a.input_grad.defined() && b.input_grad.defined());
  EXPECT_EQ(max_abs_diff(a.input_grad, b.input_grad), 0.0);
}

Variable input(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return Variable(randn(shape, kF32, &g), /*requires_grad=*/true);
}

Variable loss_of(const Model& m, const Variable& x) {
  const Variable out = m->forward(x);
  return cross_entropy(out, argmax(out.data(), 1));
}

// Ordinary backward vs B then W on fresh copies of the same model and input.
void check_split(const std::function<Model()>& make, const Shape& shape,
                 const std::function<Variable(const Model&, const Variable&)>& loss = loss_of) {
  const Model plain = make(), split = make();
  const Variable x1 = input(shape, 5), x2 = input(shape, 5);
  loss(plain, x1).backward();
  const Result want = grads_of(plain, x1);

  WeightGradStore store;
  {
    DeferWeightGradients defer(store);
    loss(split, x2).backward();
  }
  EXPECT_GT(store.size(), 0u);
  EXPECT_GT(store.held_bytes(), 0);
  // After B: the input's gradient is final; Linear and Conv2d weights have none yet.
  ASSERT_TRUE(x2.grad().defined());
  EXPECT_EQ(max_abs_diff(x2.grad(), want.input_grad), 0.0);
  for (const auto& [name, p] : split->named_parameters()) {
    if (name.find("bn") == std::string::npos && p.dim() >= 2) {
      EXPECT_FALSE(p.grad().defined()) << name << " has a gradient after B";
    }
  }
  store.run();
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.held_bytes(), 0);
  expect_identical(want, grads_of(split, x2), split);
}

Model mlp() {
  manual_seed(7);
  return models::MLP(12, 16, 5);
}

Model resnet20() {
  manual_seed(7);
  return models::ResNet20(1, 10);
}

TEST(WeightGrad, MlpSplitEqualsOrdinaryBackward) { check_split(mlp, {3, 12}); }

TEST(WeightGrad, ResNetSplitEqualsOrdinaryBackward) { check_split(resnet20, {2, 1, 8, 8}); }

TEST(WeightGrad, UnderBf16AutocastTheCastsCarryTheWeightGradients) {
  check_split(mlp, {3, 12}, [](const Model& m, const Variable& x) {
    AutocastGuard autocast(kBF16);
    return loss_of(m, x);
  });
}

// The ordinary backward computes a convolution's two passes in one call (conv2d_backward:
// bf16 reorders the output gradient once for oneDNN's two primitives, f16 widens it once); B
// then W calls them one at a time. Same bits either way.
TEST(WeightGrad, ResNetUnderHalfAutocastSplitEqualsOrdinaryBackward) {
  for (DType type : {kBF16, kF16}) {
    SCOPED_TRACE(dtype_name(type));
    check_split(resnet20, {2, 1, 8, 8}, [type](const Model& m, const Variable& x) {
      AutocastGuard autocast(type);
      return loss_of(m, x);
    });
  }
}

TEST(WeightGrad, ComposesWithActivationCheckpointing) {
  check_split(mlp, {3, 12}, [](const Model& m, const Variable& x) {
    // The whole MLP checkpointed: its layers re-run, and split, inside B.
    const Variable out = checkpoint([&](const Variable& in) { return m->forward(in); }, x);
    return cross_entropy(out, argmax(out.data(), 1));
  });
}

TEST(WeightGrad, MicroBatchesAccumulateAsGradientAccumulationDoes) {
  const Model plain = mlp(), split = mlp();
  const Variable a = input({3, 12}, 1), b = input({3, 12}, 2);
  loss_of(plain, a).backward();
  loss_of(plain, b).backward();
  const Result want = grads_of(plain, a);
  for (bool reversed : {false, true}) {
    split->zero_grad();
    const Variable a2 = input({3, 12}, 1), b2 = input({3, 12}, 2);
    WeightGradStore first, second;
    {
      DeferWeightGradients defer(first);
      loss_of(split, a2).backward();
    }
    {
      DeferWeightGradients defer(second);
      loss_of(split, b2).backward();
    }
    if (reversed) {
      second.run();
      first.run();
    } else {
      first.run();
      second.run();
    }
    Result got = grads_of(split, a2);
    got.input_grad = a2.grad();
    expect_identical(want, got, split);
  }
}

TEST(WeightGrad, HooksFireInWAndCallbacksQueuedInBRunAfterTheLastW) {
  const Model m = mlp();
  std::vector<std::string> events;
  const std::vector<Variable> ps = m->parameters();  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  for (const Variable& p : ps) {
    p.register_grad_ready_hook([&events, name = p.name()](Variable&) {
      events.push_back("ready " + name);
    });
  }
  // A pre-backward hook on the output queues a callback from inside B.
  Variable x = input({3, 12}, 3);
  Variable out = m->forward(x);
  out.register_hook([&events](Tensor&) {
    queue_callback([&events] { events.push_back("callback"); });
  });
  WeightGradStore store;
  {
    DeferWeightGradients defer(store);
    cross_entropy(out, argmax(out.data(), 1)).backward();
  }
  EXPECT_TRUE(events.empty()) << events.size() << " events in B, the first " << events[0];
  store.run();
  ASSERT_EQ(events.size(), ps.size() + 1);
  EXPECT_EQ(events.back(), "callback");
}

// defer_leaves(parameters): B gives the parameters nothing (BatchNorm's affine parameters, whose
// gradients B computes, included) and fires none of their hooks, the input gets its final
// gradient; W delivers every parameter's, each hook once, and two micro-batches B1 B2 W1 W2
// accumulate exactly what two ordinary backwards do.
TEST(WeightGrad, DeferredLeavesGetEveryGradientInW) {
  const Model plain = resnet20(), split = resnet20();
  const Variable a = input({2, 1, 8, 8}, 1), b = input({2, 1, 8, 8}, 2);
  loss_of(plain, a).backward();
  const Result first_only = grads_of(plain, a);
  loss_of(plain, b).backward();
  const Result want = grads_of(plain, a);
  int ready = 0;
  for (const Variable& p : split->parameters()) {
    p.register_grad_ready_hook([&ready](Variable&) { ++ready; });
  }
  const Variable a2 = input({2, 1, 8, 8}, 1), b2 = input({2, 1, 8, 8}, 2);
  WeightGradStore first, second;
  first.defer_leaves(split->parameters());
  second.defer_leaves(split->parameters());
  {
    DeferWeightGradients defer(first);
    loss_of(split, a2).backward();
  }
  EXPECT_EQ(max_abs_diff(a2.grad(), first_only.input_grad), 0.0);
  {
    DeferWeightGradients defer(second);
    loss_of(split, b2).backward();
  }
  EXPECT_EQ(ready, 0);
  for (const auto& [name, p] : split->named_parameters()) {
    EXPECT_FALSE(p.grad().defined()) << name << " has a gradient after B";
  }
  first.run();
  EXPECT_EQ(ready, static_cast<int>(split->parameters().size()));
  expect_identical(first_only, {grads_of(split, a2).grads, a2.grad()}, split);
  second.run();
  EXPECT_EQ(ready, 2 * static_cast<int>(split->parameters().size()));
  EXPECT_EQ(second.held_bytes(), 0);
  expect_identical(want, {grads_of(split, a2).grads, a2.grad()}, split);
}

}  // namespace
}  // namespace tessera
