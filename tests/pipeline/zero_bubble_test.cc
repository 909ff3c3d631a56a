// ZB-H1 and ZB-H2 checked literally action by action for small K and M (worked out by hand
// from the rules in pipeline/zero_bubble.h), their relation to 1F1B, the argument checks, and
// the grid with W cells.
#include "pipeline/zero_bubble.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline/schedule_grid.h"
#include "tensor/check.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace pipeline {
namespace {

using testing::expect_error;

std::vector<std::string> lists_of(std::vector<Action> (*generator)(int, int, int), int K, int M) {
  std::vector<std::string> out;
  for (int s = 0; s < K; ++s) out.push_back(to_string(generator(K, M, s)));
  return out;
}

using Lists = std::vector<std::string>;

TEST(ZeroBubble, TwoStagesTwoMicrobatches) {
  // ZB-H1: stage 0 warms up with K-1-s = 1 forward, W lag 0; stage 1 lags its W by 1.
  EXPECT_EQ(lists_of(zb_h1, 2, 2), (Lists{
                                       "F0 SA0 F1 RG0 SA1 B0 W0 RG1 B1 W1",
                                       "RA0 F0 B0 SG0 RA1 F1 B1 SG1 W0 W1",
                                   }));
  // ZB-H2 with M = 2 < 2K-1 = 3: stage 0 forwards both micro-batches first (its warm-up of
  // 2(K-1-s) = 2 is all of them), stage 1's lag 2s = 2 shrinks by 2K-1-M = 1.
  EXPECT_EQ(lists_of(zb_h2, 2, 2), (Lists{
                                       "F0 SA0 F1 SA1 RG0 B0 W0 RG1 B1 W1",
                                       "RA0 F0 B0 SG0 RA1 F1 B1 SG1 W0 W1",
                                   }));
}

TEST(ZeroBubble, TwoStagesFourMicrobatches) {
  // ZB-H1 is 1F1B's list (receive the gradient before sending the activation) with W j-s
  // right after B j (and its SG), the rest at the end.
  EXPECT_EQ(lists_of(zb_h1, 2, 4),
            (Lists{
                "F0 SA0 F1 RG0 SA1 B0 W0 F2 RG1 SA2 B1 W1 F3 RG2 SA3 B2 W2 RG3 B3 W3",
                "RA0 F0 B0 SG0 RA1 F1 B1 SG1 W0 RA2 F2 B2 SG2 W1 RA3 F3 B3 SG3 W2 W3",
            }));
  // ZB-H2, M = 4 >= 2K-1: stage 0 runs 2(K-1)+1 = 3 forwards before B0, stage 1 lags its W by
  // 2s = 2 and ends with 2s+1 = 3 of them; receives right before, sends right after.
  EXPECT_EQ(lists_of(zb_h2, 2, 4),
            (Lists{
                "F0 SA0 F1 SA1 F2 SA2 RG0 B0 W0 F3 SA3 RG1 B1 W1 RG2 B2 W2 RG3 B3 W3",
                "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2 W0 RA3 F3 B3 SG3 W1 W2 W3",
            }));
}

TEST(ZeroBubble, ThreeStagesThreeMicrobatches) {
  EXPECT_EQ(lists_of(zb_h1, 3, 3),
            (Lists{
                "F0 SA0 F1 SA1 F2 RG0 SA2 B0 W0 RG1 B1 W1 RG2 B2 W2",
                "RA0 F0 SA0 RA1 F1 RG0 SA1 B0 SG0 RA2 F2 RG1 SA2 B1 SG1 W0 RG2 B2 SG2 W1 W2",
                "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2 W0 W1 W2",
            }));
  // M = 3 < 2K-1 = 5: warm-ups min(2(K-1-s), M) = 3, 2, 0; lags 2s - (2K-1-M) = 0, 0, 2.
  EXPECT_EQ(lists_of(zb_h2, 3, 3),
            (Lists{
                "F0 SA0 F1 SA1 F2 SA2 RG0 B0 W0 RG1 B1 W1 RG2 B2 W2",
                "RA0 F0 SA0 RA1 F1 SA1 RA2 F2 SA2 RG0 B0 SG0 W0 RG1 B1 SG1 W1 RG2 B2 SG2 W2",
                "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2 W0 W1 W2",
            }));
}

TEST(ZeroBubble, FewerMicrobatchesThanStagesAndOneStage) {
  // M = 2 < K = 4: the warm-up is capped at M.
  EXPECT_EQ(lists_of(zb_h1, 4, 2), (Lists{
                                       "F0 SA0 F1 SA1 RG0 B0 W0 RG1 B1 W1",
                                       "RA0 F0 SA0 RA1 F1 SA1 RG0 B0 SG0 RG1 B1 SG1 W0 W1",
                                       "RA0 F0 SA0 RA1 F1 RG0 SA1 B0 SG0 RG1 B1 SG1 W0 W1",
                                       "RA0 F0 B0 SG0 RA1 F1 B1 SG1 W0 W1",
                                   }));
  // One stage: no messages, F B W per micro-batch.
  EXPECT_EQ(to_string(zb_h1(1, 3, 0)), "F0 B0 W0 F1 B1 W1 F2 B2 W2");
  EXPECT_EQ(to_string(zb_h2(1, 3, 0)), "F0 B0 W0 F1 B1 W1 F2 B2 W2");
}

std::vector<Action> without(std::vector<Action> list, ActionKind kind) {
  list.erase(std::remove_if(list.begin(), list.end(), [&](const Action& a) { return a.kind == kind; }),
             list.end());
  return list;
}

std::vector<Action> computations(const std::vector<Action>& list) {
  std::vector<Action> out;
  for (const Action& a : list) {
    if (is_compute(a.kind)) out.push_back(a);
  }
  return out;
}

TEST(ZeroBubble, ZBH1IsOneFOneBWithWeightPassesAdded) {
  for (int K = 1; K <= 8; ++K) {
    for (int M = 1; M <= 16; ++M) {
      for (int s = 0; s < K; ++s) {
        EXPECT_EQ(without(zb_h1(K, M, s), ActionKind::kWeight), one_f_one_b(K, M, s))
            << "K=" << K << " M=" << M << " stage " << s;
      }
    }
  }
}

TEST(ZeroBubble, FourStagesEightMicrobatchesComputationOrder) {
  // The grids of pipeline/zero_bubble.h, stage by stage. ZB-H2 warms up with 2(K-1-s)+1
  // forwards before its first B and lags its W by 2s backwards.
  const Lists h1 = {
      "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7",
      "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7",
      "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7",
      "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7",
  };
  const Lists h2 = {
      "F0 F1 F2 F3 F4 F5 F6 B0 W0 F7 B1 W1 B2 W2 B3 W3 B4 W4 B5 W5 B6 W6 B7 W7",
      "F0 F1 F2 F3 F4 B0 F5 B1 F6 B2 W0 F7 B3 W1 B4 W2 B5 W3 B6 W4 B7 W5 W6 W7",
      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 W0 F7 B5 W1 B6 W2 B7 W3 W4 W5 W6 W7",
      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 W0 F7 B7 W1 W2 W3 W4 W5 W6 W7",
  };
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(to_string(computations(zb_h1(4, 8, s))), h1[s]) << "stage " << s;
    EXPECT_EQ(to_string(computations(zb_h2(4, 8, s))), h2[s]) << "stage " << s;
  }
}

TEST(ZeroBubble, EveryBIsFollowedByItsWOnce) {
  for (auto generator : {zb_h1, zb_h2}) {
    for (int K = 1; K <= 8; ++K) {
      for (int M = 1; M <= 16; ++M) {
        for (int s = 0; s < K; ++s) {
          const auto list = generator(K, M, s);
          for (int i = 0; i < M; ++i) {
            const auto b = std::find(list.begin(), list.end(), B(i));
            ASSERT_NE(b, list.end());
            EXPECT_EQ(std::count(b, list.end(), W(i)), 1) << "K=" << K << " M=" << M << " s=" << s;
            EXPECT_EQ(std::count(list.begin(), b, W(i)), 0);
          }
        }
      }
    }
  }
}

TEST(ZeroBubble, WiredIntoTheScheduleKinds) {
  EXPECT_EQ(parse_schedule("zb-h1"), ScheduleKind::kZBH1);
  EXPECT_EQ(parse_schedule("zb-h2"), ScheduleKind::kZBH2);
  EXPECT_STREQ(schedule_name(ScheduleKind::kZBH1), "zb-h1");
  EXPECT_STREQ(schedule_name(ScheduleKind::kZBH2), "zb-h2");
  EXPECT_EQ(make_schedule(ScheduleKind::kZBH1, 3, 5, 1), zb_h1(3, 5, 1));
  EXPECT_EQ(make_schedules(ScheduleKind::kZBH2, 3, 5)[2], zb_h2(3, 5, 2));
  EXPECT_TRUE(splits_backward(zb_h2(3, 5, 0)));
  EXPECT_FALSE(splits_backward(one_f_one_b(3, 5, 0)));
  EXPECT_EQ(to_string(W(3)), "W3");
  EXPECT_EQ(to_string(W(3, 1), true), "W3.1");
  // Evaluation (forward_only) runs the forwards of the training lists, in micro-batch order.
  for (auto generator : {zb_h1, zb_h2}) {
    for (int s = 0; s < 4; ++s) {
      auto forwards = generator(4, 6, s);
      for (ActionKind k : {ActionKind::kBackward, ActionKind::kWeight, ActionKind::kRecvGradient,
                           ActionKind::kSendGradient}) {
        forwards = without(forwards, k);
      }
      EXPECT_EQ(forwards, forward_only(4, 6, s)) << "stage " << s;
    }
  }
  expect_error([] { make_schedule(ScheduleKind::kZBH1, 2, 4, 0, 2); }, "got chunks = 2");
  expect_error([] { zb_h1(0, 4, 0); }, "zb_h1: the number of stages K must be at least 1, got 0");
  expect_error([] { zb_h2(2, 0, 0); }, "zb_h2: the number of micro-batches M must be at least 1, got 0");
  expect_error([] { zb_h2(2, 4, 2); }, "zb_h2: stage 2 is not in [0, 2)");
  expect_error([] { parse_schedule("zb-v"); }, "is not one of gpipe, 1f1b, interleaved, zb-h1, zb-h2");
}

TEST(ZeroBubble, EagerSendsMoveSendsAheadOfWeightPasses) {
  // ZB-H1's "F i RG j SA i" becomes "F i SA i RG j"; W passes stay where they are.
  EXPECT_EQ(to_string(eager_sends(zb_h1(2, 4, 0))),
            "F0 SA0 F1 SA1 RG0 B0 W0 F2 SA2 RG1 B1 W1 F3 SA3 RG2 B2 W2 RG3 B3 W3");
  // A send placed after a W (by hand) goes back before it, right after its B.
  EXPECT_EQ(to_string(eager_sends({RA(0), F(0), B(0), W(0), SG(0)})), "RA0 F0 B0 SG0 W0");
  // ZB-H2's lists already send right after each computation.
  for (int s = 0; s < 4; ++s) EXPECT_EQ(eager_sends(zb_h2(4, 8, s)), zb_h2(4, 8, s));
}

TEST(ZeroBubble, GridDrawsWeightCells) {
  EXPECT_EQ(explain(ScheduleKind::kZBH2, 2, 4),
            "zb-h2  K=2 M=4\n"
            "slot      0   1   2   3   4   5   6   7   8   9   10  11  12\n"
            "stage 0   F0  F1  F2  B0  W0  F3  B1  W1  B2  W2  B3  W3  .\n"
            "stage 1   .   F0  B0  F1  B1  F2  B2  W0  F3  B3  W1  W2  W3\n"
            "stage 0: peak in flight 3, pending W 1, idle 0.077\n"
            "stage 1: peak in flight 3, pending W 3, idle 0.077\n"
            "bubble: least with a flush (K-1)/(3vM+K-1) = 1/13 = 0.077, simulated 0.077; "
            "without a flush 0.000 (K=2 M=4 v=1; F, B, W one slot each)\n");
  EXPECT_EQ(explain_timing(ScheduleKind::kZBH1, 4, 8, 1, StageTimes{1, 2, 1}),
            "timing model, equal stages: F 1, backward 2 = B 1 + W 1\n"
            "  step 27.000, bubble 3.000 (0.111 of the step); without a flush 3.000 (0.111)\n"
            "  ZB-H1 closed form (K-1)(T_F + T_B - T_W) = 3.000\n");
  EXPECT_EQ(explain_timing(ScheduleKind::kOneFOneB, 4, 8, 1, StageTimes{1, 2, 1}),
            "timing model, equal stages: F 1, backward 2\n"
            "  step 33.000, bubble 9.000 (0.273 of the step); without a flush 9.000 (0.273)\n");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
