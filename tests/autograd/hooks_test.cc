// The two hook kinds the parallel layers rely on: grad-ready hooks on leaves (fired right after
// accumulation, during backward, in reverse order of use) and pre-backward hooks (fired when a
// Variable's gradient arrives, before its producer runs; they may replace the gradient).
#include <gtest/gtest.h>

#include <string>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "tensor/ops.h"

namespace tessera {
namespace {

Variable param(const Shape& shape, uint64_t seed, const std::string& name) {
  Generator g(seed);
  Variable v(randn(shape, kF64, &g), true);
  v.set_name(name);
  return v;
}

TEST(Hooks, GradReadyFiresDuringBackwardInReverseOrderOfUse) {
  // A three-layer chain: x -> l1 -> tanh -> l2 -> tanh -> l3 -> loss.
  Variable w1 = param({4, 3}, 1, "w1"), w2 = param({4, 4}, 2, "w2"), w3 = param({2, 4}, 3, "w3");
  std::vector<std::string> events;
  for (Variable w : {w1, w2, w3}) {
    w.register_grad_ready_hook([&events, w1](Variable& leaf) {
      EXPECT_TRUE(leaf.grad().defined());  // already accumulated when the hook runs
      events.push_back(leaf.name() + (w1.grad().defined() ? " (w1 done)" : ""));
    });
  }
  Variable x(randn({5, 3}, kF64));
  Variable h1 = tanh(linear(x, w1, Variable()));
  h1.register_hook([&events](Tensor&) { events.push_back("h1 grad arrived"); });
  Variable h2 = tanh(linear(h1, w2, Variable()));
  sum(linear(h2, w3, Variable())).backward();
  // w3 and w2 are ready before backward reaches layer 1: a DDP bucket could start then.
  EXPECT_EQ(events, (std::vector<std::string>{"w3", "w2", "h1 grad arrived", "w1 (w1 done)"}));
}

TEST(Hooks, PreBackwardHookRunsBeforeTheProducerAndCanReplaceTheGradient) {
  Variable w = param({3}, 4, "w");
  Variable x(from_vector<double>({1, 2, 3}, {3}));
  Variable h = w * x;  // produced by MulBackward
  bool producer_ran = false;
  w.register_hook([&producer_ran](Tensor&) { producer_ran = true; });  // w's grad = producer ran
  h.register_hook([&producer_ran](Tensor& grad) {
    EXPECT_FALSE(producer_ran);
    grad = mul(grad, 10.0);  // replace the gradient flowing on
  });
  sum(h).backward();
  EXPECT_TRUE(producer_ran);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{10, 20, 30}));
}

TEST(Hooks, LeafPreHookRunsBeforeAccumulation) {
  Variable w = param({2}, 5, "w");
  w.register_hook([&w](Tensor& grad) {
    EXPECT_FALSE(w.grad().defined());
    grad = mul(grad, 0.5);
  });
  sum(w * 4.0).backward();
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(Hooks, RemoveHook) {
  Variable w = param({2}, 6, "w");
  int calls = 0;
  const int handle = w.register_grad_ready_hook([&calls](Variable&) { ++calls; });
  sum(w).backward();
  w.remove_hook(handle);
  sum(w).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(w.remove_hook(handle), Error);
}

TEST(Hooks, GradReadyFiresOnceAfterAllUsesAccumulate) {
  // A leaf used twice gets one accumulated gradient and one hook call per backward.
  Variable w = param({2}, 7, "w");
  int calls = 0;
  Tensor seen;
  w.register_grad_ready_hook([&](Variable& leaf) {
    ++calls;
    seen = leaf.grad().clone();
  });
  sum(w * 2.0 + w * 3.0).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen.to_vector<double>(), (std::vector<double>{5, 5}));
}

TEST(Hooks, ExceptionsInHooksReachTheCaller) {
  Variable w = param({2}, 8, "w");
  w.register_grad_ready_hook([](Variable&) { TS_FAIL("hook failed on purpose"); });
  EXPECT_THROW(sum(w).backward(), Error);
}

TEST(Hooks, OnlyGradientCarryingVariablesTakeHooks) {
  Variable c(ones({2}));
  EXPECT_THROW(c.register_hook([](Tensor&) {}), Error);
  Variable w = param({2}, 9, "w");
  Variable h = w * 2.0;
  EXPECT_THROW(h.register_grad_ready_hook([](Variable&) {}), Error);  // not a leaf
}

TEST(PostBackwardCallbacks, RunOnceAfterTheWholeGraphInQueueOrder) {
  Variable w1 = param({4, 3}, 1, "w1"), w2 = param({2, 4}, 2, "w2");
  std::vector<std::string> events;
  bool queued = false;
  for (Variable w : {w1, w2}) {
    w.register_grad_ready_hook([&](Variable& leaf) {
      events.push_back(leaf.name());
      if (queued) return;
      queued = true;  // the first hook queues, as DDP does
      queue_callback([&] {
        events.push_back("first callback");
        queue_callback([&] { events.push_back("queued by a callback"); });
      });
      queue_callback([&] { events.push_back("second callback"); });
    });
  }
  Variable x(randn({5, 3}, kF64));
  sum(linear(tanh(linear(x, w1, Variable())), w2, Variable())).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w2", "w1", "first callback", "second callback",
                                              "queued by a callback"}));
  EXPECT_FALSE(in_backward());
  // Nothing carries over to the next backward.
  events.clear();
  queued = true;
  sum(linear(x, w1, Variable())).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w1"}));
}

TEST(PostBackwardCallbacks, OutsideBackwardIsAnError) {
  EXPECT_FALSE(in_backward());
  EXPECT_THROW(queue_callback([] {}), Error);
}

TEST(PostBackwardCallbacks, CheckpointedSegmentsQueueOnTheOuterBackward) {
  // The checkpointed segment's backward runs inside the outer one; a callback queued there must
  // wait until w_outer (used before the segment) has its gradient too.
  Variable w_outer = param({3}, 3, "w_outer"), w_inner = param({3}, 4, "w_inner");
  std::vector<std::string> events;
  w_inner.register_grad_ready_hook([&](Variable&) {
    events.push_back("w_inner ready");
    queue_callback([&] {
      events.push_back(w_outer.grad().defined() ? "callback after w_outer" : "callback too early");
    });
  });
  w_outer.register_grad_ready_hook([&](Variable&) { events.push_back("w_outer ready"); });
  Variable h = w_outer * 2.0;
  Variable y = checkpoint([&](const Variable& v) { return tanh(v * w_inner); }, h);
  sum(y).backward();
  EXPECT_EQ(events, (std::vector<std::string>{"w_inner ready", "w_outer ready",
                                              "callback after w_outer"}));
}

TEST(PostBackwardCallbacks, AnExceptionDropsTheQueue) {
  Variable w = param({2}, 5, "w"), v = param({2}, 6, "v");
  int queued = 0, runs = 0;
  w.register_grad_ready_hook([&](Variable&) {
    ++queued;
    queue_callback([&] { ++runs; });
  });
  v.register_grad_ready_hook([](Variable&) { TS_FAIL("hook failed on purpose"); });
  // Later nodes run first: w's accumulator (made by the add) before v's (made by the mul).
  EXPECT_THROW(sum(v * 3.0 + w).backward(), Error);
  EXPECT_FALSE(in_backward());
  EXPECT_EQ(queued, 1);
  EXPECT_EQ(runs, 0);
  // The next backward starts with an empty queue.
  sum(w * 2.0).backward();
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace tessera
