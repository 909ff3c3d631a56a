// Schedules checked literally action by action (torchgpipe's test_clock_cycles), the
// argument checks, and the grid.
#include "pipeline/schedule.h"

#include <gtest/gtest.h>

#include "pipeline/schedule_grid.h"
#include "tensor/check.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace pipeline {
namespace {

TEST(Schedule, GPipeForFourStagesAndEightMicrobatches) {
  const std::vector<std::string> expected = {
      "F0 SA0 F1 SA1 F2 SA2 F3 SA3 F4 SA4 F5 SA5 F6 SA6 F7 SA7 "
      "RG0 B0 RG1 B1 RG2 B2 RG3 B3 RG4 B4 RG5 B5 RG6 B6 RG7 B7",
      "RA0 F0 SA0 RA1 F1 SA1 RA2 F2 SA2 RA3 F3 SA3 RA4 F4 SA4 RA5 F5 SA5 RA6 F6 SA6 RA7 F7 SA7 "
      "RG0 B0 SG0 RG1 B1 SG1 RG2 B2 SG2 RG3 B3 SG3 RG4 B4 SG4 RG5 B5 SG5 RG6 B6 SG6 RG7 B7 SG7",
      "RA0 F0 SA0 RA1 F1 SA1 RA2 F2 SA2 RA3 F3 SA3 RA4 F4 SA4 RA5 F5 SA5 RA6 F6 SA6 RA7 F7 SA7 "
      "RG0 B0 SG0 RG1 B1 SG1 RG2 B2 SG2 RG3 B3 SG3 RG4 B4 SG4 RG5 B5 SG5 RG6 B6 SG6 RG7 B7 SG7",
      "RA0 F0 RA1 F1 RA2 F2 RA3 F3 RA4 F4 RA5 F5 RA6 F6 RA7 F7 "
      "B0 SG0 B1 SG1 B2 SG2 B3 SG3 B4 SG4 B5 SG5 B6 SG6 B7 SG7",
  };
  for (int s = 0; s < 4; ++s) EXPECT_EQ(to_string(gpipe(4, 8, s)), expected[s]) << "stage " << s;
}

TEST(Schedule, OneFOneBForFourStagesAndEightMicrobatches) {
  // Warm-up K-s-1 forwards; in the steady state the gradient is received before the
  // activation is sent (schedule.h explains why).
  const std::vector<std::string> expected = {
      "F0 SA0 F1 SA1 F2 SA2 "
      "F3 RG0 SA3 B0 F4 RG1 SA4 B1 F5 RG2 SA5 B2 F6 RG3 SA6 B3 F7 RG4 SA7 B4 "
      "RG5 B5 RG6 B6 RG7 B7",
      "RA0 F0 SA0 RA1 F1 SA1 "
      "RA2 F2 RG0 SA2 B0 SG0 RA3 F3 RG1 SA3 B1 SG1 RA4 F4 RG2 SA4 B2 SG2 "
      "RA5 F5 RG3 SA5 B3 SG3 RA6 F6 RG4 SA6 B4 SG4 RA7 F7 RG5 SA7 B5 SG5 "
      "RG6 B6 SG6 RG7 B7 SG7",
      "RA0 F0 SA0 "
      "RA1 F1 RG0 SA1 B0 SG0 RA2 F2 RG1 SA2 B1 SG1 RA3 F3 RG2 SA3 B2 SG2 RA4 F4 RG3 SA4 B3 SG3 "
      "RA5 F5 RG4 SA5 B4 SG4 RA6 F6 RG5 SA6 B5 SG5 RA7 F7 RG6 SA7 B6 SG6 "
      "RG7 B7 SG7",
      "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2 RA3 F3 B3 SG3 "
      "RA4 F4 B4 SG4 RA5 F5 B5 SG5 RA6 F6 B6 SG6 RA7 F7 B7 SG7",
  };
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(to_string(one_f_one_b(4, 8, s)), expected[s]) << "stage " << s;
  }
}

TEST(Schedule, OneFOneBWithFewerMicrobatchesThanStagesWarmsUpWithAll) {
  EXPECT_EQ(to_string(one_f_one_b(4, 2, 0)), "F0 SA0 F1 SA1 RG0 B0 RG1 B1");
  EXPECT_EQ(to_string(one_f_one_b(4, 2, 2)), "RA0 F0 SA0 RA1 F1 RG0 SA1 B0 SG0 RG1 B1 SG1");
  EXPECT_EQ(to_string(one_f_one_b(1, 3, 0)), "F0 B0 F1 B1 F2 B2");
}

TEST(Schedule, InterleavedTwoStagesTwoMicrobatchesTwoChunks) {
  // M == K: Megatron-LM runs every forward first. Rank 0 holds virtual stages 0 and 2, rank 1
  // holds 1 and 3; chunk 1 of rank 0 receives from chunk 0 of rank 1.
  EXPECT_EQ(to_string(interleaved_1f1b(2, 2, 0, 2), true),
            "F0.0 SA0.0 F1.0 SA1.0 RA0.1 F0.1 SA0.1 RA1.1 F1.1 SA1.1 "
            "RG0.1 B0.1 SG0.1 RG1.1 B1.1 SG1.1 RG0.0 B0.0 RG1.0 B1.0");
  EXPECT_EQ(to_string(interleaved_1f1b(2, 2, 1, 2), true),
            "RA0.0 F0.0 SA0.0 RA1.0 F1.0 SA1.0 RA0.1 F0.1 RA1.1 F1.1 "
            "B0.1 SG0.1 B1.1 SG1.1 RG0.0 B0.0 SG0.0 RG1.0 B1.0 SG1.0");
}

TEST(Schedule, InterleavedComputationOrderFollowsMegatron) {
  // K = 4, M = 8, v = 2, rank 0: warm-up (K-s-1)*2 + (v-1)*K = 10 forwards in groups of K
  // micro-batches per chunk, then 1F1B with the backward walking the chunks in reverse.
  std::vector<Action> computes;
  for (const Action& a : interleaved_1f1b(4, 8, 0, 2)) {
    if (is_compute(a.kind)) computes.push_back(a);
  }
  EXPECT_EQ(to_string(computes, true),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 "
            "F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 "
            "B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
}

TEST(Schedule, ForwardOnlyForEvaluation) {
  EXPECT_EQ(to_string(forward_only(3, 3, 0)), "F0 SA0 F1 SA1 F2 SA2");
  EXPECT_EQ(to_string(forward_only(3, 3, 1)), "RA0 F0 SA0 RA1 F1 SA1 RA2 F2 SA2");
  EXPECT_EQ(to_string(forward_only(3, 3, 2)), "RA0 F0 RA1 F1 RA2 F2");
  EXPECT_EQ(to_string(forward_only(2, 2, 0, 2), true),
            "F0.0 SA0.0 F1.0 SA1.0 RA0.1 F0.1 SA0.1 RA1.1 F1.1 SA1.1");
}

TEST(Schedule, EagerSendsGoRightAfterTheirComputation) {
  // 1F1B stage 2 of 4, M = 4: "F1 RG0 SA1" becomes "F1 SA1 RG0".
  EXPECT_EQ(to_string(one_f_one_b(4, 4, 2)),
            "RA0 F0 SA0 RA1 F1 RG0 SA1 B0 SG0 RA2 F2 RG1 SA2 B1 SG1 RA3 F3 RG2 SA3 B2 SG2 RG3 B3 SG3");
  EXPECT_EQ(to_string(eager_sends(one_f_one_b(4, 4, 2))),
            "RA0 F0 SA0 RA1 F1 SA1 RG0 B0 SG0 RA2 F2 SA2 RG1 B1 SG1 RA3 F3 SA3 RG2 B2 SG2 RG3 B3 SG3");
  // GPipe's sends already follow their computations.
  EXPECT_EQ(eager_sends(gpipe(3, 4, 1)), gpipe(3, 4, 1));
}

using testing::expect_error;

TEST(Schedule, BadArgumentsAreErrorsNamingTheValues) {
  expect_error([] { gpipe(0, 4, 0); }, "at least 1, got 0");
  expect_error([] { one_f_one_b(4, 0, 0); }, "micro-batches M must be at least 1, got 0");
  expect_error([] { gpipe(4, 4, 4); }, "stage 4 is not in [0, 4)");
  expect_error([] { interleaved_1f1b(4, 6, 0, 2); },
               "M = 6 must be a multiple of the number of stages K = 4");
  expect_error([] { interleaved_1f1b(1, 4, 0, 2); }, "at least 2 stages");
  expect_error([] { make_schedule(ScheduleKind::kGPipe, 2, 4, 0, 2); }, "got chunks = 2");
  expect_error([] { parse_schedule("pipedream"); }, "'pipedream' is not one of gpipe, 1f1b");
  EXPECT_EQ(parse_schedule("1f1b"), ScheduleKind::kOneFOneB);
}

TEST(Schedule, BubbleFormula) {
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8), 3.0 / 11);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8, 2), 3.0 / 19);
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8), 0);
}

TEST(ScheduleGrid, DrawsOneFOneBForTwoStages) {
  EXPECT_EQ(explain(ScheduleKind::kOneFOneB, 2, 4),
            "1f1b  K=2 M=4\n"
            "slot      0   1   2   3   4   5   6   7   8   9\n"
            "stage 0   F0  F1  .   B0  F2  B1  F3  B2  .   B3\n"
            "stage 1   .   F0  B0  F1  B1  F2  B2  F3  B3  .\n"
            "stage 0: peak in flight 2, idle 0.200\n"
            "stage 1: peak in flight 1, idle 0.200\n"
            "bubble: theory (K-1)/(vM+K-1) = 1/5 = 0.200, simulated 0.200 (K=2 M=4 v=1)\n");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
