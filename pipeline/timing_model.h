// Timing model: a batch's action lists played on a clock where each stage's forward and
// backward take given times and messages are free, the assumptions behind the bubble formula
// (K-1)/(vM+K-1) except one: the stages need not be equal. Messages may be given a cost too.
//
// A rank runs its list in order; an action starts when its rank is free and what it needs has
// ended: F i of virtual stage j needs F i of virtual stage j-1, B i needs F i of its own
// virtual stage and B i of virtual stage j+1, W i needs B i of its own virtual stage, a receive
// needs its send. A send takes `MessageCosts::send` of its rank's time, a receive
// `MessageCosts::receive` once its send has ended (the copy of a message that has arrived); both
// are free by default.
//
// Backward times. `StageTimes::backward` is always the whole backward, input and weight
// gradients together, which is what B takes in a list without W (GPipe, 1F1B, interleaved).
// `StageTimes::weight` is the weight-gradient part of it: in a list with W actions (ZB-H1,
// ZB-H2) B takes backward - weight (the input gradient) and W takes weight. So a backward twice
// the forward split evenly is StageTimes{1, 2, 1}: 1F1B's B takes 2, a zero-bubble list's B and
// W take 1 each, and every schedule does the same work (F = 1, backward = 2 per micro-batch).
// In the paper's symbols T_F = forward, T_B = backward - weight, T_W = weight.
//
// Zero bubble (pipeline/zero_bubble.h), equal stages, M >= K, ends of batches flushed:
//   1F1B   (K-1)(T_F + T_B + T_W)
//   ZB-H1  (K-1) max(T_F, T_B, T_F + T_B - T_W)   = the paper's (K-1)(T_F + T_B - T_W), its
//          closed form zb_h1_bubble(), whenever T_W <= T_F and T_W <= T_B; with a larger W the
//          first stage's wait for its first B, (K-1) T_B, or the last stage's late start,
//          (K-1) T_F, can no longer be filled (tests/pipeline/timing_model_test.cc plays both)
//   ZB-H2  at F = B = W: (K-1) T_F, the least any schedule can idle with a flush (the last stage
//          starts (K-1) T_F late); without a flush (TimedStep::bubble_without_flush) 0.
//
// With equal stages it gives the formula for every schedule, whatever the ratio of backward to
// forward time. With unequal ones it shows how far a measured bubble can move for reasons that
// are not the executor's: K = 2, interleaved v = 2, M = 16, stage 0 1% slower than stage 1, and
// the slower stage idles 0.021 of the step instead of 0.030 (tests/pipeline/timing_model_test.cc).
// pipeline_bench plays each step's lists with the stages' measured times, so what its
// measurement adds beyond this model is the executor's: messages, and the compute's jitter.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pipeline/schedule.h"

namespace tessera {
namespace pipeline {

// One stage's compute times, for one chunk of one micro-batch (any unit). backward is the
// whole backward; weight the part of it a split W takes (0 <= weight <= backward; see above).
struct StageTimes {
  double forward = 1, backward = 1, weight = 0;
};

// Per message, on the sender's and the receiver's clock.
struct MessageCosts {
  double send = 0, receive = 0;
};

struct TimedStep {
  double makespan = 0;        // until the last stage finishes
  std::vector<double> busy;   // per stage: time spent computing
  // Per stage: from the start of its first computation to the end of its last.
  std::vector<double> span;
  // Per stage: 1 - busy / makespan; their mean; and the idle fraction of the stage that
  // computes longest (the bottleneck), the papers' bubble.
  double idle_fraction(int stage) const { return 1.0 - busy[stage] / makespan; }
  double mean_idle() const;
  double bottleneck_idle() const;
  // The same as a time: makespan - the longest busy time.
  double bubble() const;
  // Batches back to back without a flush (each stage starts its next batch when it finishes
  // this one: the paper's optimizer post-validation): the period is the longest span, and this
  // is period - the longest busy time.
  double bubble_without_flush() const;
};

// lists[s]: stage s's actions (make_schedules(); sound, so validate() them first), times[s]
// its compute times, chunks = v. Throws if the lists cannot be played to the end.
TimedStep play_timed(const std::vector<std::vector<Action>>& lists, int chunks,
                     const std::vector<StageTimes>& times, const MessageCosts& costs = {});

// The same with any duration per action: duration(s, n) is how long stage s's n-th action
// takes (a receive: once its send has ended). A step's trace replayed this way keeps each
// computation's own time, jitter included.
using ActionDuration = std::function<double(int stage, size_t index)>;
TimedStep play_timed(const std::vector<std::vector<Action>>& lists, int chunks,
                     const ActionDuration& duration);

// The bubble a schedule predicts with equal stages, as an idle fraction of the step: GPipe,
// 1F1B and interleaved (K-1)/(vM+K-1) (bubble_fraction); ZB-H1 and ZB-H2 their lists played
// with forward = B = W = 1 (a backward twice the forward, split evenly), the zero-bubble paper's
// assumption. `formula` (when given) gets how it was computed, for reports.
double predicted_bubble(ScheduleKind kind, int stages, int microbatches, int chunks = 1,
                        std::string* formula = nullptr);

// ZB-H1's bubble in closed form, (K-1)(T_F + T_B - T_W) with T_B = backward - weight and
// T_W = weight: what play_timed() gives for ZB-H1's lists with equal stages when M >= K and
// T_W <= min(T_F, T_B); (K-1)(T_F + T_B + T_W) is 1F1B's.
double zb_h1_bubble(int stages, const StageTimes& times);

}  // namespace pipeline
}  // namespace tessera
