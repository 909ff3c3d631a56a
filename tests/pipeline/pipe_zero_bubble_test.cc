// Zero-bubble pipelines (ZB-H1, ZB-H2: backward split into B and W, autograd/weight_grad.h) on
// K = 2 and 3 ranks equal one process doing gradient accumulation over the same micro-batches,
// after 3 SGD steps (f32, 1e-5): batches not divisible by M and smaller than M, with and
// without activation checkpointing. ZB-H1 holds no more activation memory between actions than
// 1F1B plus its pending W work (the layers' inputs and output gradients W still needs).
#include <gtest/gtest.h>

#include <cstdio>

#include "dist/environment.h"
#include "pipeline/pipe.h"
#include "tests/pipeline/mlp.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

TEST(PipeZeroBubble, EqualsGradientAccumulation) {
  for (const char* schedule : {"zb-h1", "zb-h2"}) {
    for (const char* mode : {"never", "always", "except_last"}) {
      SCOPED_TRACE(::testing::Message() << schedule << " checkpoint " << mode);
      // Batches of 12 (even micro-batches), 7 (uneven) and 3 (fewer rows than M = 4).
      pipeline_matches_accumulation(deep_mlp, schedule, 4, {12, 7, 3}, {1, 8, 8}, 1, mode);
    }
  }
}

TEST(PipeZeroBubble, ZbH1HoldsNoMoreThanOneFOneBPlusItsPendingWeightWork) {
  auto world = dist::world();
  const int M = 8;
  auto stats = [&](const std::string& schedule) {
    Pipe pipe(mlp_of(13, {64, 64, 64, 64, 64, 64, 64, 64, 10}), world, loss_fn,
              PipeOptions().microbatches(M).schedule(schedule));
    const Batch b = make_batch(0, 256, {1, 8, 8});
    pipe.train_step(b.x, b.y);  // the first step allocates the parameters' grads
    pipe.train_step(b.x, b.y);
    return pipe.stats();
  };
  const StageStats one_f_one_b = stats("1f1b"), h1 = stats("zb-h1"), h2 = stats("zb-h2");
  std::printf("rank %d: held between actions 1f1b %lld, zb-h1 %lld (pending W %lld), zb-h2 %lld "
              "(pending W %lld); in flight %d, %d, %d\n", world->rank(),
              static_cast<long long>(one_f_one_b.peak_held_bytes),
              static_cast<long long>(h1.peak_held_bytes),
              static_cast<long long>(h1.peak_pending_weight_bytes),
              static_cast<long long>(h2.peak_held_bytes),
              static_cast<long long>(h2.peak_pending_weight_bytes), one_f_one_b.peak_in_flight,
              h1.peak_in_flight, h2.peak_in_flight);
  EXPECT_GT(h1.peak_pending_weight_bytes, 0);
  EXPECT_EQ(one_f_one_b.peak_pending_weight_bytes, 0);
  EXPECT_LE(h1.peak_held_bytes, one_f_one_b.peak_held_bytes + h1.peak_pending_weight_bytes);
  // From F to B ZB-H1 keeps 1F1B's micro-batches in flight (from B to W only the pending W
  // work); ZB-H2 warms up with more.
  EXPECT_EQ(h1.peak_in_flight, one_f_one_b.peak_in_flight);
  EXPECT_GE(h2.peak_in_flight, h1.peak_in_flight);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
