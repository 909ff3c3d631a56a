// One measured pipeline step played back by the timing model (pipeline/timing_model.h), to
// tell the bubble the schedule implies from what the executor adds. Three plays of the step's
// action lists:
//   stages:        each stage's mean forward and backward times, free messages (the formula
//                  moved by the stages' imbalance alone);
//   with_messages: the same, each send and receive charged its measured median cost;
//   replayed:      each computation and send as long as it took, each receive the median copy
//                  (its span also holds the wait, which the replay is to explain).
#pragma once

#include <vector>

#include "pipeline/schedule.h"
#include "pipeline/timing_model.h"
#include "pipeline/trace.h"
#include "pipeline/trace_stats.h"

namespace tessera {
namespace bench {

struct ModeledStep {
  std::vector<pipeline::StageTimes> times;  // per stage, from its spans
  pipeline::MessageStats messages;
  pipeline::TimedStep stages, with_messages, replayed;
};

// spans: every rank's spans of one step (pipeline::gather_trace); lists: the executor's action
// lists for that step, one per rank, which the spans must follow action by action; v: chunks
// per rank.
ModeledStep model_step(const std::vector<std::vector<pipeline::Span>>& spans,
                       const std::vector<std::vector<pipeline::Action>>& lists, int v);

// The jitter: how much a stage's backwards of equal micro-batches differ within a step
// (standard deviation over mean; 0 for fewer than two).
double backward_spread(const std::vector<pipeline::Span>& spans);

}  // namespace bench
}  // namespace tessera
