// The validator over every schedule on a grid of (K, M, v), and catching broken schedules:
// a deadlock, messages out of order, a missing or repeated computation, a misplaced W.
#include "pipeline/validator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "pipeline/zero_bubble.h"
#include "tensor/check.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace pipeline {
namespace {

using testing::expect_error;

TEST(Validator, GPipeAndOneFOneBAreSoundForEveryKAndMUnderBothTransports) {
  for (Transport transport : {Transport::kBlocking, Transport::kBuffered}) {
    for (int K = 1; K <= 8; ++K) {
      for (int M = 1; M <= 16; ++M) {
        SCOPED_TRACE(::testing::Message() << "K=" << K << " M=" << M);
        const ValidationReport g = validate(make_schedules(ScheduleKind::kGPipe, K, M), M, 1, transport);
        const ValidationReport f =
            validate(make_schedules(ScheduleKind::kOneFOneB, K, M), M, 1, transport);
        for (int s = 0; s < K; ++s) {
          EXPECT_EQ(g.stage[s].peak_in_flight, M) << "stage " << s;
          EXPECT_EQ(f.stage[s].peak_in_flight, std::min(K - s, M)) << "stage " << s;
        }
        EXPECT_EQ(g.makespan, 2 * (M + K - 1));
        EXPECT_EQ(f.makespan, 2 * (M + K - 1));
        EXPECT_NEAR(g.bubble_simulated(), bubble_fraction(K, M), 1e-12);
        EXPECT_NEAR(f.bubble_simulated(), bubble_fraction(K, M), 1e-12);
      }
    }
  }
}

TEST(Validator, InterleavedIsSoundWhereverMIsAMultipleOfK) {
  for (int v = 2; v <= 3; ++v) {
    for (int K = 2; K <= 8; ++K) {
      for (int M = K; M <= 16; M += K) {
        SCOPED_TRACE(::testing::Message() << "K=" << K << " M=" << M << " v=" << v);
        const ValidationReport r =
            validate(make_schedules(ScheduleKind::kInterleaved, K, M, v), M, v, Transport::kBuffered);
        EXPECT_EQ(r.makespan, 2 * (v * M + K - 1));
        EXPECT_NEAR(r.bubble_simulated(), bubble_fraction(K, M, v), 1e-12);
        // Rank 0 holds the most: its warm-up plus the one steady forward, at most v*M.
        EXPECT_EQ(r.stage[0].peak_in_flight,
                  M == K ? v * M : std::min(v * M, 2 * (K - 1) + (v - 1) * K + 1));
      }
    }
  }
  // Under blocking sends the ranks' activation sends form a ring in the warm-up.
  expect_error([] { validate(make_schedules(ScheduleKind::kInterleaved, 2, 4, 2), 4, 2); },
               "stage 0 waits at action #3 (SA1.0) to send to stage 1, which is at SA0.0; "
               "stage 1 waits at action #2 (SA0.0) to send to stage 0, which is at SA1.0;");
}

TEST(Validator, ForwardOnlySchedulesAreSoundAndHoldOneMicrobatch) {
  for (int K = 1; K <= 8; ++K) {
    for (int M = 1; M <= 16; ++M) {
      std::vector<std::vector<Action>> lists;
      for (int s = 0; s < K; ++s) lists.push_back(forward_only(K, M, s));
      const ValidationReport r = validate(lists, M, 1, Transport::kBlocking, /*backward=*/false);
      for (int s = 0; s < K; ++s) EXPECT_EQ(r.stage[s].peak_in_flight, 1);
      EXPECT_EQ(r.makespan, M + K - 1);
    }
  }
  std::vector<std::vector<Action>> interleaved;
  for (int s = 0; s < 4; ++s) interleaved.push_back(forward_only(4, 8, s, 2));
  EXPECT_NO_THROW(validate(interleaved, 8, 2, Transport::kBuffered, false));
  // A training list is not a forward-only one, and the other way round.
  expect_error([] { validate(make_schedules(ScheduleKind::kGPipe, 2, 2), 2, 1, Transport::kBlocking, false); },
               "a forward-only schedule has no backward pass");
  expect_error([] { validate({forward_only(2, 2, 0), forward_only(2, 2, 1)}, 2); },
               "stage 0 never runs the backward of micro-batch 0");
}

TEST(Validator, EagerSendsStaySoundUnderBufferedSendsWithTheSameMakespan) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    const int v = kind == ScheduleKind::kInterleaved ? 2 : 1;
    for (int K = (v > 1 ? 2 : 1); K <= 6; ++K) {
      for (int M = 1; M <= 12; ++M) {
        if (v > 1 && M % K != 0) continue;
        SCOPED_TRACE(::testing::Message() << schedule_name(kind) << " K=" << K << " M=" << M);
        auto lists = make_schedules(kind, K, M, v);
        const long makespan = validate(lists, M, v, Transport::kBuffered).makespan;
        for (auto& list : lists) list = eager_sends(list);
        EXPECT_EQ(validate(lists, M, v, Transport::kBuffered).makespan, makespan);
      }
    }
  }
  // Under blocking sends the eager 1F1B order is the naive one, which deadlocks.
  auto eager = make_schedules(ScheduleKind::kOneFOneB, 2, 4);
  for (auto& list : eager) list = eager_sends(list);
  expect_error([&] { validate(eager, 4); }, "deadlock");
}

TEST(Validator, TheNaiveOneFOneBOrderDeadlocksUnderBlockingSends) {
  // Stage 0 sends activation 1 before receiving gradient 0, while stage 1 sends gradient 0
  // before receiving activation 1: each send waits for a receive the other never reaches.
  auto lists = make_schedules(ScheduleKind::kOneFOneB, 2, 4);
  auto& s0 = lists[0];
  const auto rg0 = std::find(s0.begin(), s0.end(), RG(0));
  ASSERT_EQ(*(rg0 + 1), SA(1));
  std::iter_swap(rg0, rg0 + 1);
  expect_error([&] { validate(lists, 4); },
               "deadlock: no stage can move; stage 0 waits at action #3 (SA1) to send to stage 1, "
               "which is at SG0; stage 1 waits at action #3 (SG0) to send to stage 0, which is at SA1;");
  // Buffered sends do not wait, so the same lists run there.
  EXPECT_NO_THROW(validate(lists, 4, 1, Transport::kBuffered));
}

TEST(Validator, ReceivingAGradientBeforeSendingItsActivationDeadlocksEverywhere) {
  auto lists = make_schedules(ScheduleKind::kGPipe, 3, 2);
  // Stage 1: "RA0 F0 SA0 ..." becomes "RA0 F0 RG0 ...": waits for a gradient of an activation
  // it has not sent yet.
  auto& s1 = lists[1];
  s1.erase(std::find(s1.begin(), s1.end(), SA(0)));
  s1.insert(std::find(s1.begin(), s1.end(), RG(0)) + 1, SA(0));
  std::iter_swap(std::find(s1.begin(), s1.end(), RG(0)), std::find(s1.begin(), s1.end(), SA(1)));
  for (Transport t : {Transport::kBlocking, Transport::kBuffered}) {
    expect_error([&] { validate(lists, 2, 1, t); }, "deadlock");
  }
}

TEST(Validator, SwappedSendOrderIsCaught) {
  auto lists = make_schedules(ScheduleKind::kGPipe, 2, 3);
  auto& s0 = lists[0];  // F0 SA0 F1 SA1 F2 SA2 ... -> F0 F1 SA1 SA0 ...
  std::iter_swap(std::find(s0.begin(), s0.end(), SA(0)), std::find(s0.begin(), s0.end(), SA(1)));
  s0.erase(std::find(s0.begin(), s0.end(), F(1)));
  s0.insert(std::find(s0.begin(), s0.end(), SA(1)), F(1));
  // Blocking: stage 0 offers activation 1, stage 1 waits for activation 0: deadlock.
  expect_error([&] { validate(lists, 3); },
               "stage 0 waits at action #2 (SA1) to send to stage 1, which is at RA0");
  // Buffered: the receiver finds activation 1 first on the link.
  expect_error([&] { validate(lists, 3, 1, Transport::kBuffered); },
               "stage 1, action #0 (RA0): the next message from stage 0 on that link is for RA1");
}

TEST(Validator, MissingRepeatedOrMisplacedComputationsAreErrors) {
  auto missing_backward = make_schedules(ScheduleKind::kGPipe, 2, 4);
  missing_backward[0].erase(std::find(missing_backward[0].begin(), missing_backward[0].end(), B(3)));
  expect_error([&] { validate(missing_backward, 4); },
               "stage 0 never runs the backward of micro-batch 3");

  auto missing_send = make_schedules(ScheduleKind::kOneFOneB, 3, 4);
  missing_send[1].erase(std::find(missing_send[1].begin(), missing_send[1].end(), SG(2)));
  expect_error([&] { validate(missing_send, 4); },
               "stage 1 never runs the gradient send of micro-batch 2");

  auto twice = make_schedules(ScheduleKind::kGPipe, 2, 2);
  twice[1].push_back(F(1));
  expect_error([&] { validate(twice, 2); }, "stage 1, action #8 (F1): a second forward of micro-batch 1");

  auto early = make_schedules(ScheduleKind::kOneFOneB, 2, 2);
  std::iter_swap(std::find(early[1].begin(), early[1].end(), F(0)),
                 std::find(early[1].begin(), early[1].end(), B(0)));
  expect_error([&] { validate(early, 2); }, "stage 1, action #1 (B0): backward before the forward");

  auto out_of_range = make_schedules(ScheduleKind::kGPipe, 1, 2);
  out_of_range[0].push_back(F(2));
  expect_error([&] { validate(out_of_range, 2); }, "micro-batch 2 is not in [0, 2)");

  auto first_sends_gradient = make_schedules(ScheduleKind::kGPipe, 2, 1);
  first_sends_gradient[0].push_back(SG(0));
  expect_error([&] { validate(first_sends_gradient, 1); }, "the first stage sends no gradients");
}

TEST(Validator, ZeroBubbleSchedulesAreSoundForEveryKAndM) {
  for (int K = 1; K <= 8; ++K) {
    for (int M = 1; M <= 16; ++M) {
      SCOPED_TRACE(::testing::Message() << "K=" << K << " M=" << M);
      const auto h1_lists = make_schedules(ScheduleKind::kZBH1, K, M);
      const auto h2_lists = make_schedules(ScheduleKind::kZBH2, K, M);
      // ZB-H1 keeps 1F1B's message order: sound under both transports. ZB-H2 needs buffered
      // sends (the header of pipeline/zero_bubble.h; the deadlock is below).
      EXPECT_NO_THROW(validate(h1_lists, M, 1, Transport::kBlocking));
      const ValidationReport h1 = validate(h1_lists, M, 1, Transport::kBuffered);
      const ValidationReport h2 = validate(h2_lists, M, 1, Transport::kBuffered);
      const ValidationReport f =
          validate(make_schedules(ScheduleKind::kOneFOneB, K, M), M, 1, Transport::kBlocking);
      ASSERT_TRUE(h1.split_backward && h2.split_backward);
      ASSERT_FALSE(f.split_backward);
      int one_f_one_b_peak = 0;
      for (int s = 0; s < K; ++s) one_f_one_b_peak = std::max(one_f_one_b_peak, f.stage[s].peak_in_flight);
      ASSERT_EQ(one_f_one_b_peak, std::min(K, M));
      for (int s = 0; s < K; ++s) {
        // An activation counts from F to W. ZB-H1 holds 1F1B's peak (its stage 0's) on every
        // stage and no more; a later stage holds more than 1F1B's same stage, K-s (it must:
        // zero_bubble.h).
        EXPECT_LE(h1.stage[s].peak_in_flight, one_f_one_b_peak) << "stage " << s;
        EXPECT_EQ(h1.stage[s].peak_in_flight, std::min(K, M)) << "stage " << s;
        EXPECT_EQ(h1.stage[s].peak_pending_weight, std::min(s + 1, M)) << "stage " << s;
        EXPECT_EQ(h2.stage[s].peak_in_flight, std::min(2 * K - 1, M)) << "stage " << s;
        if (M >= 2 * K - 1) {
          EXPECT_EQ(h2.stage[s].peak_pending_weight, 2 * s + 1) << "stage " << s;
        }
      }
      // F, B and W one slot each, 3M busy: the bubble with a flush is K-1 slots, the least
      // possible, once M >= K, and 2K-1-M slots below; ZB-H2's equals it.
      const long bubble = K - 1 + std::max(0, K - M);
      EXPECT_EQ(h1.makespan, 3 * M + bubble);
      EXPECT_EQ(h2.makespan, 3 * M + bubble);
      if (M >= K) {
        EXPECT_NEAR(h1.bubble_simulated(), h1.bubble_theory(), 1e-12);
      }
      // Without a flush ZB-H1's stage 0 still idles in the middle of its batch; ZB-H2's idle
      // falls to 0 at M = 2K-1.
      EXPECT_NEAR(h1.bubble_without_flush(), h1.bubble_simulated(), 1e-12);
      const long h2_idle = std::max(0, 2 * K - 1 - M);
      EXPECT_NEAR(h2.bubble_without_flush(), static_cast<double>(h2_idle) / (3 * M + h2_idle), 1e-12);
      // The executor plays eager_sends() of each list: still sound, the same makespan.
      for (const auto* lists : {&h1_lists, &h2_lists}) {
        auto eager = *lists;
        for (auto& list : eager) list = eager_sends(list);
        EXPECT_EQ(validate(eager, M, 1, Transport::kBuffered).makespan, 3 * M + bubble);
      }
    }
  }
}

TEST(Validator, ZeroBubbleTransports) {
  // ZB-H1 under blocking sends: no deadlock, but each send waits for its receiver, and the
  // stages, each with its W passes at other points, are not in step.
  EXPECT_EQ(validate(make_schedules(ScheduleKind::kZBH1, 4, 8), 8, 1, Transport::kBlocking).makespan, 33);
  EXPECT_EQ(validate(make_schedules(ScheduleKind::kZBH1, 4, 8), 8, 1, Transport::kBuffered).makespan, 27);
  EXPECT_EQ(transport_for(ScheduleKind::kZBH1), Transport::kBuffered);
  EXPECT_EQ(transport_for(ScheduleKind::kZBH2), Transport::kBuffered);
  // ZB-H2 under blocking sends: stage 0 sends activation 1 a forward ahead of stage 1 (its
  // warm-up is two forwards longer), while stage 1 waits to send gradient 0.
  expect_error([] { validate(make_schedules(ScheduleKind::kZBH2, 2, 4), 4); },
               "deadlock: no stage can move; stage 0 waits at action #3 (SA1) to send to stage 1, "
               "which is at SG0; stage 1 waits at action #3 (SG0) to send to stage 0, which is at SA1;");
}

TEST(Validator, MisplacedOrMissingWeightPassesAreErrors) {
  // W before its B.
  auto early = make_schedules(ScheduleKind::kZBH1, 2, 2);
  ASSERT_EQ(to_string(early[1]), "RA0 F0 B0 SG0 RA1 F1 B1 SG1 W0 W1");
  std::iter_swap(std::find(early[1].begin(), early[1].end(), B(1)),
                 std::find(early[1].begin(), early[1].end(), W(1)));
  std::iter_swap(std::find(early[1].begin(), early[1].end(), B(1)),
                 std::find(early[1].begin(), early[1].end(), W(0)));
  ASSERT_EQ(to_string(early[1]), "RA0 F0 B0 SG0 RA1 F1 W1 SG1 B1 W0");
  expect_error([&] { validate(early, 2, 1, Transport::kBuffered); },
               "stage 1, action #6 (W1): weight gradient before its backward (B1)");

  // A W missing while the list has others: the error names the B that has none.
  auto missing = make_schedules(ScheduleKind::kZBH2, 3, 4);
  missing[2].erase(std::find(missing[2].begin(), missing[2].end(), W(2)));
  expect_error([&] { validate(missing, 4, 1, Transport::kBuffered); },
               "stage 2, action #10 (B2): no W2 follows it: a list with W actions needs one W for every B");

  // Twice.
  auto twice = make_schedules(ScheduleKind::kZBH1, 2, 2);
  twice[0].push_back(W(1));
  expect_error([&] { validate(twice, 2, 1, Transport::kBuffered); },
               "stage 0, action #10 (W1): a second weight gradient of micro-batch 1");

  // Per chunk: interleaved lists with a W after every B are sound; a W on the wrong chunk is
  // a second W of that chunk.
  auto chunks = make_schedules(ScheduleKind::kInterleaved, 2, 2, 2);
  for (auto& list : chunks) {
    for (size_t n = 0; n < list.size(); ++n) {
      if (list[n].kind != ActionKind::kBackward) continue;
      const Action b = list[n];
      list.insert(list.begin() + static_cast<std::ptrdiff_t>(n + 1), W(b.microbatch, b.chunk));
      ++n;
    }
  }
  EXPECT_NO_THROW(validate(chunks, 2, 2, Transport::kBuffered));
  *std::find(chunks[0].begin(), chunks[0].end(), W(0, 0)) = W(0, 1);
  expect_error([&] { validate(chunks, 2, 2, Transport::kBuffered); },
               "(W0.1): a second weight gradient of micro-batch 0");

  // Not in an evaluation list.
  expect_error([] { validate({{F(0), W(0)}}, 1, 1, Transport::kBlocking, false); },
               "stage 0, action #1 (W0): a forward-only schedule has no backward pass");
  // A list without W (the other stage's) is fine: each list splits its backwards or does not.
  auto mixed = make_schedules(ScheduleKind::kOneFOneB, 2, 2);
  mixed[1] = zb_h1(2, 2, 1);
  EXPECT_NO_THROW(validate(mixed, 2, 1, Transport::kBuffered));
}

TEST(Validator, ReportPrintsPeakInFlightAndTheBubble) {
  const ValidationReport r = validate(make_schedules(ScheduleKind::kOneFOneB, 4, 8), 8);
  EXPECT_EQ(r.str(),
            "stage 0: peak in flight 4, idle 0.273\n"
            "stage 1: peak in flight 3, idle 0.273\n"
            "stage 2: peak in flight 2, idle 0.273\n"
            "stage 3: peak in flight 1, idle 0.273\n"
            "bubble: theory (K-1)/(vM+K-1) = 3/11 = 0.273, simulated 0.273 (K=4 M=8 v=1)");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
