// The timing model against the bubble formula (equal stages, any backward/forward ratio) and
// against a step worked out by hand (unequal stages); the zero-bubble schedules' bubbles
// against 1F1B's and ZB-H1's closed form.
#include "pipeline/timing_model.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline/schedule.h"
#include "pipeline/zero_bubble.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace pipeline {
namespace {

using testing::expect_error;

TEST(TimingModel, EqualStagesGiveTheFormulaForEverySchedule) {
  for (const ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    const int v = kind == ScheduleKind::kInterleaved ? 2 : 1;
    for (int K = 1; K <= 8; ++K) {
      for (int M = 1; M <= 16; ++M) {
        if (v > 1 && (K < 2 || M % K != 0)) continue;  // what interleaving requires
        const auto lists = make_schedules(kind, K, M, v);
        for (const StageTimes t : {StageTimes{1, 1}, StageTimes{1, 2}, StageTimes{0.3, 1.7}}) {
          const TimedStep step = play_timed(lists, v, std::vector<StageTimes>(K, t));
          const double formula = static_cast<double>(K - 1) / (v * M + K - 1);
          SCOPED_TRACE(std::string(schedule_name(kind)) + " K=" + std::to_string(K) + " M=" +
                       std::to_string(M) + " backward/forward=" + std::to_string(t.backward / t.forward));
          // vM + K - 1 slots of one chunk's forward and backward.
          EXPECT_NEAR(step.makespan, (v * M + K - 1) * (t.forward + t.backward), 1e-9);
          for (int s = 0; s < K; ++s) EXPECT_NEAR(step.idle_fraction(s), formula, 1e-12);
        }
      }
    }
  }
}

TEST(TimingModel, PredictedBubbleOfEachScheduleByHand) {
  // 1F1B, K = 2, M = 4: (K-1)/(M+K-1) = 1/5.
  std::string formula;
  EXPECT_DOUBLE_EQ(predicted_bubble(ScheduleKind::kOneFOneB, 2, 4, 1, &formula), 0.2);
  EXPECT_EQ(formula, "(K-1)/(vM+K-1)");
  // ZB-H1, K = 2, M = 4, F = B = W = 1: each stage computes 4 x 3 = 12 and idles
  // (K-1)(T_F + T_B - T_W) = 1, so 1/13 of the step.
  EXPECT_NEAR(predicted_bubble(ScheduleKind::kZBH1, 2, 4, 1, &formula), 1.0 / 13, 1e-12);
  EXPECT_EQ(formula, "zb-h1 played with F = B = W (timing model)");
}

TEST(TimingModel, UnequalStagesByHand) {
  // 1F1B, K = 2, M = 2; stage 0 takes twice as long as stage 1 (F 2, B 4 against F 1, B 2):
  //   stage 0: F0 [0,2]  F1 [2,4]  B0 [5,9] (waits for stage 1's B0)  B1 [9,13]
  //   stage 1: F0 [2,3]  B0 [3,5]  F1 [5,6]  B1 [6,8]
  const TimedStep step = play_timed(make_schedules(ScheduleKind::kOneFOneB, 2, 2), 1,
                                    {StageTimes{2, 4}, StageTimes{1, 2}});
  EXPECT_DOUBLE_EQ(step.makespan, 13);
  EXPECT_DOUBLE_EQ(step.busy[0], 12);
  EXPECT_DOUBLE_EQ(step.busy[1], 6);
  EXPECT_DOUBLE_EQ(step.bottleneck_idle(), 1.0 / 13);
  EXPECT_DOUBLE_EQ(step.mean_idle(), (1.0 / 13 + 7.0 / 13) / 2);
}

TEST(TimingModel, MessageCostsByHand) {
  // GPipe, K = 2, M = 2, F 1 and B 2 on both stages; a send takes 0.1 of its rank's time, a
  // receive 0.5 once its send has ended:
  //   stage 0: F0 [0,1] SA0 [1,1.1] F1 [1.1,2.1] SA1 [2.1,2.2]
  //            RG0 [6.2,6.7] B0 [6.7,8.7] RG1 [8.7,9.2] B1 [9.2,11.2]
  //   stage 1: RA0 [1.1,1.6] F0 [1.6,2.6] RA1 [2.6,3.1] F1 [3.1,4.1]
  //            B0 [4.1,6.1] SG0 [6.1,6.2] B1 [6.2,8.2] SG1 [8.2,8.3]
  const auto lists = make_schedules(ScheduleKind::kGPipe, 2, 2);
  ASSERT_EQ(to_string(lists[0]), "F0 SA0 F1 SA1 RG0 B0 RG1 B1");
  ASSERT_EQ(to_string(lists[1]), "RA0 F0 RA1 F1 B0 SG0 B1 SG1");
  const std::vector<StageTimes> times(2, StageTimes{1, 2});
  const TimedStep step = play_timed(lists, 1, times, MessageCosts{0.1, 0.5});
  EXPECT_NEAR(step.makespan, 11.2, 1e-12);
  EXPECT_DOUBLE_EQ(step.busy[0], 6);
  EXPECT_DOUBLE_EQ(step.busy[1], 6);
  EXPECT_NEAR(step.bottleneck_idle(), 1 - 6 / 11.2, 1e-12);
  // Free messages: the formula, 1/3 of 9.
  EXPECT_DOUBLE_EQ(play_timed(lists, 1, times).makespan, 9);
}

TEST(TimingModel, EachActionItsOwnDuration) {
  // GPipe, K = 2, M = 2, free messages, every computation 1 except stage 0's F1 (its third
  // action), 3:
  //   stage 0: F0 [0,1] F1 [1,4]                 B0 [6,7] B1 [7,8]
  //   stage 1:          F0 [1,2] F1 [4,5] B0 [5,6] B1 [6,7]
  const auto lists = make_schedules(ScheduleKind::kGPipe, 2, 2);
  ASSERT_EQ(lists[0][2], F(1));
  const TimedStep step = play_timed(lists, 1, [&](int s, size_t n) {
    if (!is_compute(lists[s][n].kind)) return 0.0;
    return s == 0 && n == 2 ? 3.0 : 1.0;
  });
  EXPECT_DOUBLE_EQ(step.makespan, 8);
  EXPECT_DOUBLE_EQ(step.busy[0], 6);
  EXPECT_DOUBLE_EQ(step.busy[1], 4);
}

TEST(TimingModel, OnePercentOfImbalanceMovesTheInterleavedBubble) {
  // K = 2, v = 2, M = 16 (formula 1/33 = 0.030), backward twice forward. Stage 0 1% slower: the
  // slower stage idles 0.021, 30% under the formula; stage 1 1% slower: 0.030, but stage 0
  // then waits for it at every message and the stages' mean rises to 0.035.
  const auto lists = make_schedules(ScheduleKind::kInterleaved, 2, 16, 2);
  const TimedStep first_slower = play_timed(lists, 2, {StageTimes{1.01, 2.02}, StageTimes{1, 2}});
  EXPECT_NEAR(first_slower.bottleneck_idle(), 0.021, 0.001);
  EXPECT_LT(first_slower.mean_idle(), 1.0 / 33);
  const TimedStep last_slower = play_timed(lists, 2, {StageTimes{1, 2}, StageTimes{1.01, 2.02}});
  EXPECT_NEAR(last_slower.bottleneck_idle(), 1.0 / 33, 0.001);
  EXPECT_NEAR(last_slower.mean_idle(), 0.035, 0.001);
}

TEST(TimingModel, ZBH1EqualsItsClosedFormAtEqualForwardBackwardAndWeight) {
  // F = B = W = 1: the whole backward is 2, split evenly. ZB-H1's bubble is (K-1)(T_F + T_B -
  // T_W) = K-1 against 1F1B's (K-1)(T_F + T_B + T_W) = 3(K-1), with the same work.
  const StageTimes t{1, 2, 1};
  for (int K = 1; K <= 8; ++K) {
    for (int M = K; M <= 16; ++M) {
      SCOPED_TRACE(::testing::Message() << "K=" << K << " M=" << M);
      const std::vector<StageTimes> times(K, t);
      const TimedStep h1 = play_timed(make_schedules(ScheduleKind::kZBH1, K, M), 1, times);
      const TimedStep f = play_timed(make_schedules(ScheduleKind::kOneFOneB, K, M), 1, times);
      EXPECT_DOUBLE_EQ(zb_h1_bubble(K, t), K - 1);
      EXPECT_DOUBLE_EQ(h1.bubble(), zb_h1_bubble(K, t));
      EXPECT_DOUBLE_EQ(f.bubble(), 3 * (K - 1));
      for (int s = 0; s < K; ++s) {
        EXPECT_DOUBLE_EQ(h1.busy[s], 3 * M);
        EXPECT_DOUBLE_EQ(f.busy[s], 3 * M);
      }
    }
  }
}

TEST(TimingModel, ZBH1ClosedFormHoldsWhileWeightIsAtMostForwardAndInputGradient) {
  // (K-1) max(T_F, T_B, T_F + T_B - T_W): the closed form while T_W <= min(T_F, T_B); beyond,
  // stage 0's wait for its first B, (K-1) T_B, or the last stage's late start, (K-1) T_F, is
  // left (timing_model.h).
  struct Case {
    StageTimes t;
    bool closed_form;
  };
  const Case cases[] = {{{1, 2, 1}, true},     {{1, 2, 0.5}, true}, {{1, 3, 1}, true},
                        {{2, 2, 1}, true},     {{1, 2, 0}, true},   {{1, 1.5, 1}, false},
                        {{0.5, 2, 1}, false},  {{1, 3, 2}, false}};
  for (const Case& c : cases) {
    const double T_F = c.t.forward, T_B = c.t.backward - c.t.weight, T_W = c.t.weight;
    for (int K = 2; K <= 6; ++K) {
      for (int M = K; M <= 12; ++M) {
        SCOPED_TRACE(::testing::Message() << "F " << T_F << " B " << T_B << " W " << T_W << " K=" << K
                                          << " M=" << M);
        const TimedStep step =
            play_timed(make_schedules(ScheduleKind::kZBH1, K, M), 1, std::vector<StageTimes>(K, c.t));
        EXPECT_NEAR(step.bubble(), (K - 1) * std::max({T_F, T_B, T_F + T_B - T_W}), 1e-9);
        if (c.closed_form) {
          EXPECT_NEAR(step.bubble(), zb_h1_bubble(K, c.t), 1e-9);
        } else {
          EXPECT_GT(step.bubble(), zb_h1_bubble(K, c.t) + 1e-9);
        }
      }
    }
  }
}

TEST(TimingModel, ZBH1IsAtMostHalfOfOneFOneBAtTwoStages) {
  const std::vector<StageTimes> times(2, StageTimes{1, 2, 1});
  const TimedStep h1 = play_timed(make_schedules(ScheduleKind::kZBH1, 2, 8), 1, times);
  const TimedStep f = play_timed(make_schedules(ScheduleKind::kOneFOneB, 2, 8), 1, times);
  EXPECT_DOUBLE_EQ(h1.bubble(), 1);  // 25 for 24 of work
  EXPECT_DOUBLE_EQ(f.bubble(), 3);   // 27
  EXPECT_LE(h1.bottleneck_idle(), f.bottleneck_idle() / 2);
}

TEST(TimingModel, ZBH2IsBelowZBH1) {
  for (int K = 2; K <= 8; ++K) {
    for (int M = 2 * K - 1; M <= 16; ++M) {
      SCOPED_TRACE(::testing::Message() << "K=" << K << " M=" << M);
      // F = B = W: with a flush both reach the least, (K-1) T_F (the last stage's late start);
      // back to back without one, ZB-H2 has no bubble at all.
      const std::vector<StageTimes> equal(K, StageTimes{1, 2, 1});
      const TimedStep h1 = play_timed(make_schedules(ScheduleKind::kZBH1, K, M), 1, equal);
      const TimedStep h2 = play_timed(make_schedules(ScheduleKind::kZBH2, K, M), 1, equal);
      EXPECT_DOUBLE_EQ(h1.bubble(), K - 1);
      EXPECT_DOUBLE_EQ(h2.bubble(), K - 1);
      EXPECT_DOUBLE_EQ(h1.bubble_without_flush(), K - 1);
      EXPECT_DOUBLE_EQ(h2.bubble_without_flush(), 0);
      // W half of B (F 1, B 2, W 1): ZB-H2 is below with a flush too.
      const std::vector<StageTimes> short_w(K, StageTimes{1, 3, 1});
      const TimedStep h1s = play_timed(make_schedules(ScheduleKind::kZBH1, K, M), 1, short_w);
      const TimedStep h2s = play_timed(make_schedules(ScheduleKind::kZBH2, K, M), 1, short_w);
      EXPECT_DOUBLE_EQ(h1s.bubble(), 2 * (K - 1));
      EXPECT_LT(h2s.bubble(), h1s.bubble());
    }
  }
}

TEST(TimingModel, BackwardIsSplitOnlyInListsWithWeightPasses) {
  // K = 2, M = 1, F 1 and a backward of 2 that splits into B 1 and W 1, by hand:
  //   1F1B   stage 1: F0 [1,2] B0 [2,4];         stage 0: F0 [0,1] B0 [4,6]
  //   ZB-H1  stage 1: F0 [1,2] B0 [2,3] W0 [3,4]; stage 0: F0 [0,1] B0 [3,4] W0 [4,5]
  // (stage 0's B waits only for stage 1's B; its W waits for its own B).
  const std::vector<StageTimes> times(2, StageTimes{1, 2, 1});
  const TimedStep f = play_timed(make_schedules(ScheduleKind::kOneFOneB, 2, 1), 1, times);
  const TimedStep h1 = play_timed(make_schedules(ScheduleKind::kZBH1, 2, 1), 1, times);
  EXPECT_DOUBLE_EQ(f.makespan, 6);
  EXPECT_DOUBLE_EQ(h1.makespan, 5);
  EXPECT_DOUBLE_EQ(h1.busy[0], 3);
  EXPECT_DOUBLE_EQ(h1.span[0], 5);
  EXPECT_DOUBLE_EQ(h1.span[1], 3);
  expect_error([] { play_timed({zb_h1(1, 1, 0)}, 1, {StageTimes{1, 1, 2}}); },
               "stage 0's weight-gradient time 2 is not within its backward's [0, 1]");
}

TEST(TimingModel, ListsThatCannotRunAreAnError) {
  // Stage 1 backwards micro-batch 0 before forwarding it, so stage 0's B0 never gets its
  // gradient either.
  expect_error([] { play_timed({{F(0), B(0)}, {B(0), F(0)}}, 1, {StageTimes{}, StageTimes{}}); },
               "stage 0 cannot run B0: an input it needs is never computed");
  expect_error([] { play_timed({{F(0), B(0)}}, 1, std::vector<StageTimes>{}); },
               "0 stage times for 1 stages");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
