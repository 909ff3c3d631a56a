// The long-sequence strong-scaling model (cost/sequence_scaling.h) against steps worked out by
// hand: a GPT-shaped profile (embed, h0, h1, ln_f, lm_head) on a link of 256 bytes per second
// and no latency, where one [B, S, h] activation (2 x 8 x 4 x 4 bytes = 256) takes a second.
#include "cost/sequence_scaling.h"

#include <gtest/gtest.h>

#include "cost/scaling.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

using testing::expect_error;

// Forward + backward: embed 2, each block 12, ln_f 1, lm_head 6: 33 seconds on one rank.
ModelProfile gpt_shaped() {
  ModelProfile m;
  m.name = "gpt-shaped";
  m.batch = 2;
  m.layers = {{"embed", {1}, 32, 1, 1},   {"h0", {1}, 32, 4, 8},     {"h1", {1}, 32, 4, 8},
              {"ln_f", {1}, 32, 0.5, 0.5}, {"lm_head", {0}, 32, 2, 4}};
  return m;
}

const SequenceShape kShape{2, 8, 4, 4, 4};  // b, s, h, a, p

Network slow_link() {
  Network n;
  n.inter = Link{0, 256};
  n.algorithm = Algorithm::kRing;
  return n;
}

TEST(SequenceScaling, OneRankIsTheProfile) {
  for (SequenceStrategy s : {SequenceStrategy::kTensor, SequenceStrategy::kTensorSequence,
                             SequenceStrategy::kRing, SequenceStrategy::kUlysses}) {
    const SequenceStep one = sequence_step(gpt_shaped(), kShape, 1, s, slow_link());
    EXPECT_DOUBLE_EQ(one.step, 33) << sequence_strategy_name(s);
    EXPECT_DOUBLE_EQ(one.exposed, 0);
  }
}

TEST(SequenceScaling, TensorParallelismSplitsBlocksAndHeadAndAllReducesTenTimes) {
  // Compute: embed 2 + blocks 24 / 2 + ln_f 1 + lm_head 6 / 2 = 18. A ring all-reduce of 256
  // bytes on 2 ranks sends 2 (1/2) 256 bytes: 1 s; 4 per block and the embedding's and head's.
  const SequenceStep p = sequence_step(gpt_shaped(), kShape, 2, SequenceStrategy::kTensor, slow_link());
  EXPECT_DOUBLE_EQ(p.compute, 18);
  EXPECT_DOUBLE_EQ(p.exposed, 10);
  EXPECT_DOUBLE_EQ(p.step, 28);
  EXPECT_EQ(p.collectives, 10);
}

TEST(SequenceScaling, SequenceParallelismSplitsEveryLayer) {
  // Compute 33 / 2. An all-gather or reduce-scatter of 256 bytes: 0.5 s; the 6 h f32 gradient
  // sums, 96 bytes all-reduced: 0.375 s. Per block 6 gathers, 4 scatters and the sums (5.375);
  // the embedding's and head's 3 gathers and 2 scatters (2.5).
  const SequenceStep p =
      sequence_step(gpt_shaped(), kShape, 2, SequenceStrategy::kTensorSequence, slow_link());
  EXPECT_DOUBLE_EQ(p.compute, 16.5);
  EXPECT_DOUBLE_EQ(p.exposed, 2 * 5.375 + 2.5);
  EXPECT_EQ(p.collectives, 27);
}

TEST(SequenceScaling, RingAttentionHidesWhatTheCoreCovers) {
  // A K/V block is 2 b (s/C) h p = 256 bytes: 1 s a message. The core's share of a block is
  // s / (12 h + s) = 8 / 56 = 1/7; a rank's forward of a block is 4 / 2 = 2 s, so each of the
  // C = 2 steps computes 2 / 7 / 2 = 1/7 s of core: 6/7 s exposed per block forward; backward
  // 8 / 2 = 4 s, 2/7 s a step under two messages: 12/7 exposed. Two blocks, one step each.
  const SequenceStep p = sequence_step(gpt_shaped(), kShape, 2, SequenceStrategy::kRing, slow_link());
  EXPECT_DOUBLE_EQ(p.compute, 16.5);
  EXPECT_NEAR(p.exposed, 2 * (6.0 / 7 + 12.0 / 7), 1e-12);
  EXPECT_DOUBLE_EQ(p.communication, 6);  // 3 messages per block
  EXPECT_EQ(p.collectives, 6);
  // At 1000 times the bandwidth every message hides under its step's core.
  Network fast = slow_link();
  fast.inter.bandwidth = 256e3;
  const SequenceStep hidden = sequence_step(gpt_shaped(), kShape, 2, SequenceStrategy::kRing, fast);
  EXPECT_DOUBLE_EQ(hidden.exposed, 0);
  EXPECT_DOUBLE_EQ(hidden.step, 16.5);
  EXPECT_NEAR(hidden.communication, 6e-3, 1e-15);
}

TEST(SequenceScaling, UlyssesAllToAllsAreExposed) {
  // Each all-to-all sends (1/2) of 2 x 4 x 4 x 4 = 64 bytes: 0.25 s; 8 per block.
  const SequenceStep p =
      sequence_step(gpt_shaped(), kShape, 2, SequenceStrategy::kUlysses, slow_link());
  EXPECT_DOUBLE_EQ(p.exposed, 2 * 8 * 0.25);
  EXPECT_EQ(p.collectives, 16);
}

TEST(SequenceScaling, TheOverheadSplitsUnderTensorParallelismOnly) {
  ModelProfile m = gpt_shaped();
  m.step_overhead_seconds = 1;
  EXPECT_DOUBLE_EQ(sequence_step(m, kShape, 2, SequenceStrategy::kTensor, slow_link()).compute, 18.5);
  EXPECT_DOUBLE_EQ(sequence_step(m, kShape, 2, SequenceStrategy::kRing, slow_link()).compute, 17.5);
}

TEST(SequenceScaling, PredictStepReportsStrongScaling) {
  ScalingOptions o;
  o.network = slow_link();
  o.sequence = SequenceStrategy::kTensor;
  o.shape = kShape;
  const ScalingPoint p = predict_step(gpt_shaped(), 2, o);
  EXPECT_EQ(p.replicas, 1);
  EXPECT_DOUBLE_EQ(p.step, 28);
  EXPECT_DOUBLE_EQ(p.images_per_second, 2 / 28.0);  // one batch of 2 windows a step
  EXPECT_DOUBLE_EQ(p.efficiency, (2 / 28.0) / (2 * 2 / 33.0));
  EXPECT_EQ(p.algorithm, "tp");
}

TEST(SequenceScaling, ErrorsNameTheValues) {
  expect_error([] { sequence_step(gpt_shaped(), kShape, 3, SequenceStrategy::kTensor, slow_link()); },
               "tp on 3 ranks: 3 does not divide the 4 heads");
  expect_error([] { sequence_step(gpt_shaped(), {2, 10, 4, 6, 4}, 3, SequenceStrategy::kRing, slow_link()); },
               "cp-ring on 3 ranks: the sequence of 10 tokens does not divide into 6 chunks");
  expect_error([] { sequence_step(gpt_shaped(), SequenceShape{}, 2, SequenceStrategy::kRing, slow_link()); },
               "gpt-shaped is not a GPT");
  expect_error([] { parse_sequence_strategy("cp"); }, "tp, tp-sp, cp-ring or cp-ulysses");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
