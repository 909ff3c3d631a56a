// Trace statistics: what the timing model (timing_model.h) needs, read from a batch's spans.
//
// stage_times(): a stage's mean forward and backward of one chunk of one micro-batch; with W
// spans (zero-bubble lists) backward is the mean B plus the mean W, and weight the mean W.
// message_stats(): over every rank's spans (gather_trace()), the messages matched up: the n-th
// activation (gradient) rank r sends goes to rank r+1 (r-1, cyclically) and is the n-th that
// rank receives (MPI keeps order on one tag). From them:
//   * send: the median time a send span takes (posting the message);
//   * receive: the median time a receive takes when its send had ended before it began (the
//     message was there: this is the copy);
//   * waited: for each receive that began before its send, send start to receive end (the
//     latency a waiting stage sees).
// Times in the spans' unit (seconds).
#pragma once

#include <vector>

#include "pipeline/timing_model.h"
#include "pipeline/trace.h"

namespace tessera {
namespace pipeline {

StageTimes stage_times(const std::vector<Span>& spans);

struct MessageStats {
  MessageCosts costs;
  std::vector<double> waited;
};
MessageStats message_stats(const std::vector<std::vector<Span>>& spans_per_rank);

double median(std::vector<double> values);  // 0 for none

}  // namespace pipeline
}  // namespace tessera
