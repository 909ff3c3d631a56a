// Trace statistics from hand-built spans: stage times, and each message matched to its send.
#include "pipeline/trace_stats.h"

#include <gtest/gtest.h>

namespace tessera {
namespace pipeline {
namespace {

TEST(TraceStats, StageTimesAreTheMeanForwardAndBackward) {
  const StageTimes t = stage_times({{F(0), false, 0, 1}, {F(1), false, 1, 4}, {SA(0), false, 4, 9},
                                    {B(0), false, 9, 11}, {Action{}, true, 11, 20}});
  EXPECT_DOUBLE_EQ(t.forward, 2);
  EXPECT_DOUBLE_EQ(t.backward, 2);
}

TEST(TraceStats, WithWeightSpansTheBackwardIsBPlusW) {
  // A zero-bubble list's B is only the input gradient; the timing model's backward is the whole.
  const StageTimes t = stage_times({{F(0), false, 0, 1}, {B(0), false, 1, 3}, {W(0), false, 3, 4},
                                    {F(1), false, 4, 5}, {B(1), false, 5, 7}, {W(1), false, 7, 10}});
  EXPECT_DOUBLE_EQ(t.forward, 1);
  EXPECT_DOUBLE_EQ(t.backward, 4);
  EXPECT_DOUBLE_EQ(t.weight, 2);
}

TEST(TraceStats, MessagesAreMatchedInOrderPerLink) {
  // Stage 0 sends activations 0 and 1 and receives gradient 0; stage 1 the other way round.
  //   SA0 [1.0, 1.1]: stage 1 was waiting in RA0 since 0.5, got it at 1.3 -> waited 0.3
  //   SA1 [2.0, 2.2]: stage 1 came to RA1 at 3.0, took 0.4 -> a copy of 0.4
  //   SG0 [5.0, 5.1]: stage 0 came to RG0 at 6.0, took 0.2 -> a copy of 0.2
  const std::vector<std::vector<Span>> spans = {
      {{F(0), false, 0, 1}, {SA(0), false, 1.0, 1.1}, {F(1), false, 1.1, 2}, {SA(1), false, 2.0, 2.2},
       {RG(0), false, 6.0, 6.2}, {B(0), false, 6.2, 8}},
      {{RA(0), false, 0.5, 1.3}, {F(0), false, 1.3, 2.3}, {RA(1), false, 3.0, 3.4},
       {B(0), false, 3.4, 5.0}, {SG(0), false, 5.0, 5.1}},
  };
  const MessageStats stats = message_stats(spans);
  ASSERT_EQ(stats.waited.size(), 1u);
  EXPECT_NEAR(stats.waited[0], 0.3, 1e-12);
  EXPECT_NEAR(stats.costs.receive, 0.3, 1e-12);  // the median of the copies 0.4 and 0.2
  EXPECT_NEAR(stats.costs.send, 0.1, 1e-12);     // of 0.1, 0.2, 0.1
}

TEST(TraceStats, MedianOfNothingIsZero) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
