// Timing model: a batch's action lists played on a clock where each stage's forward and
// backward take given times and messages are free, the assumptions behind the bubble formula
// (K-1)/(vM+K-1) except one: the stages need not be equal. Messages may be given a cost too.
//
// A rank runs its list in order; an action starts when its rank is free and what it needs has
// ended: F i of virtual stage j needs F i of virtual stage j-1, B i needs F i of its own
// virtual stage and B i of virtual stage j+1, a receive needs its send. A send takes
// `MessageCosts::send` of its rank's time, a receive `MessageCosts::receive` once its send has
// ended (the copy of a message that has arrived); both are free by default.
//
// With equal stages it gives the formula for every schedule, whatever the ratio of backward to
// forward time. With unequal ones it shows how far a measured bubble can move for reasons that
// are not the executor's: K = 2, interleaved v = 2, M = 16, stage 0 1% slower than stage 1, and
// the slower stage idles 0.021 of the step instead of 0.030 (tests/pipeline/timing_model_test.cc).
// pipeline_bench plays each step's lists with the stages' measured times, so what its
// measurement adds beyond this model is the executor's: messages, and the compute's jitter.
#pragma once

#include <functional>
#include <vector>

#include "pipeline/schedule.h"

namespace tessera {
namespace pipeline {

// One stage's compute times, for one chunk of one micro-batch (any unit).
struct StageTimes {
  double forward = 1, backward = 1;
};

// Per message, on the sender's and the receiver's clock.
struct MessageCosts {
  double send = 0, receive = 0;
};

struct TimedStep {
  double makespan = 0;        // until the last stage finishes
  std::vector<double> busy;   // per stage: time spent computing
  // Per stage: 1 - busy / makespan; their mean; and the idle fraction of the stage that
  // computes longest (the bottleneck), the papers' bubble.
  double idle_fraction(int stage) const { return 1.0 - busy[stage] / makespan; }
  double mean_idle() const;
  double bottleneck_idle() const;
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

}  // namespace pipeline
}  // namespace tessera
