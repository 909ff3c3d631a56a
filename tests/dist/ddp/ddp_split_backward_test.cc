// DDP with the backward split into B and W (autograd/weight_grad.h) on 2 ranks: the buckets'
// grad-ready hooks fire when W delivers the weights' gradients and DDP's post-backward callback
// (queued in B) runs after the last W, so the averaged gradients equal ordinary DDP's bit for
// bit, with small buckets (several all-reduces) and with one.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "autograd/weight_grad.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "models/simple.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

std::vector<Tensor> ddp_grads(bool split, double bucket_cap_mb) {
  manual_seed(11);
  auto model = models::MLP(20, 32, 4);
  DistributedDataParallel ddp(model, world(), DDPOptions().bucket_cap_mb(bucket_cap_mb));
  Generator g(100 + world()->rank());
  const Variable x(randn({6, 20}, kF32, &g));
  const Variable out = ddp.forward(x);
  const Variable loss = cross_entropy(out, argmax(out.data(), 1));
  if (split) {
    WeightGradStore store;
    {
      DeferWeightGradients defer(store);
      loss.backward();
    }
    store.run();
  } else {
    loss.backward();
  }
  std::vector<Tensor> grads;
  for (const Variable& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST(DdpSplitBackward, EqualsOrdinaryDdpBitForBit) {
  for (double cap : {0.001, 25.0}) {
    const std::vector<Tensor> want = ddp_grads(false, cap), got = ddp_grads(true, cap);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(max_abs_diff(want[i], got[i]), 0.0) << "parameter " << i << ", cap " << cap;
    }
  }
}

}  // namespace
}  // namespace dist
}  // namespace tessera
