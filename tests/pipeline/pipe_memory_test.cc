// Activation memory across several action lists: each list reports its own peak (the allocator's
// most above what was allocated when it began), and measuring it does not lose the process-wide
// peak of earlier lists, which a caller measuring around them (the train tool's run-level peak,
// a training step then an evaluation) reads afterwards. The earlier list here is a training step
// on 256 rows, the later an evaluation of 8: the earlier peak is the higher.
#include <gtest/gtest.h>

#include <functional>

#include "dist/environment.h"
#include "dist/topology.h"
#include "pipeline/pipe.h"
#include "tensor/allocator.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

// Flatten, 7 x (Linear(64, 64), ReLU), Linear(64, 10).
std::shared_ptr<nn::Sequential> long_mlp() { return mlp_of(13, {64, 64, 64, 64, 64, 64, 64, 64, 10}); }

// What a caller measuring around `run` sees: the process peak during it above the bytes
// allocated when it began.
int64_t measured_around(const std::function<void()>& run) {
  const int64_t base = memory_stats(Device::cpu()).current_bytes;
  reset_peak(Device::cpu());
  run();
  return memory_stats(Device::cpu()).peak_bytes - base;
}

TEST(PipeMemory, EachListReportsItsOwnPeakAndTheProcessKeepsTheHighest) {
  // One stage per rank's own pipeline (K = 1): no messages, so every run of a list allocates
  // exactly the same bytes in the same order and the figures compare exactly.
  const dist::Topology topo(dist::world(), 1);
  Pipe pipe(long_mlp(), topo.pipeline_group(), loss_fn, PipeOptions().microbatches(4).schedule("gpipe"));
  const Batch big = make_batch(0, 256, {1, 8, 8}), small = make_batch(1, 8, {1, 8, 8});
  pipe.train_step(big.x, big.y);  // the first step allocates the parameters' grads
  // Each list alone.
  const int64_t train_around = measured_around([&] { pipe.train_step(big.x, big.y); });
  const int64_t train_own = pipe.stats().peak_activation_bytes;
  const int64_t eval_around = measured_around([&] { pipe.forward(small.x); });
  const int64_t eval_own = pipe.stats().peak_activation_bytes;
  ASSERT_GT(train_own, eval_around);
  EXPECT_GT(eval_own, 0);
  // Both, one after the other, measured around the pair.
  const int64_t both_around = measured_around([&] {
    pipe.train_step(big.x, big.y);
    EXPECT_EQ(pipe.stats().peak_activation_bytes, train_own);
    pipe.forward(small.x);
  });
  EXPECT_EQ(pipe.stats().peak_activation_bytes, eval_own) << "the evaluation's own peak";
  EXPECT_EQ(both_around, train_around) << "the process peak lost the training step's";
}

TEST(PipeMemory, ProcessPeakCoversEveryStagesEarlierListOnKStages) {
  // K = world size: sends are released when they complete, so the figures vary a little from
  // run to run; the process peak must still cover the training list's reported peak.
  auto world = dist::world();
  Pipe pipe(long_mlp(), world, loss_fn, PipeOptions().microbatches(4).schedule("gpipe"));
  const Batch big = make_batch(0, 256, {1, 8, 8}), small = make_batch(1, 8, {1, 8, 8});
  pipe.train_step(big.x, big.y);
  int64_t train_own = 0;
  const int64_t both_around = measured_around([&] {
    pipe.train_step(big.x, big.y);
    train_own = pipe.stats().peak_activation_bytes;
    pipe.forward(small.x);
  });
  ASSERT_GT(train_own, pipe.stats().peak_activation_bytes);
  EXPECT_GE(both_around, train_own) << "stage " << pipe.stage();
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
