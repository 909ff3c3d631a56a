#include "tools/bench/pipeline_bench_modeled_step.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace tessera {
namespace bench {

ModeledStep model_step(const std::vector<std::vector<pipeline::Span>>& spans,
                       const std::vector<std::vector<pipeline::Action>>& lists, int v) {
  ModeledStep m;
  for (const auto& rank_spans : spans) m.times.push_back(pipeline::stage_times(rank_spans));
  m.messages = pipeline::message_stats(spans);
  m.stages = pipeline::play_timed(lists, v, m.times);
  m.with_messages = pipeline::play_timed(lists, v, m.times, m.messages.costs);
  for (size_t s = 0; s < lists.size(); ++s) {
    TS_CHECK(spans[s].size() >= lists[s].size(), "pipeline_bench: stage ", s, " has ",
             spans[s].size(), " spans for ", lists[s].size(), " actions");
    for (size_t n = 0; n < lists[s].size(); ++n) {
      TS_CHECK(spans[s][n].action == lists[s][n], "pipeline_bench: stage ", s, "'s span ", n,
               " is ", pipeline::span_name(spans[s][n], v > 1), ", its list says ",
               pipeline::to_string(lists[s][n], v > 1));
    }
  }
  const double receive = m.messages.costs.receive;
  m.replayed = pipeline::play_timed(lists, v, [&](int s, size_t n) {
    const pipeline::Span& span = spans[s][n];
    const bool is_receive = span.action.kind == pipeline::ActionKind::kRecvActivation ||
                            span.action.kind == pipeline::ActionKind::kRecvGradient;
    return is_receive ? receive : span.end - span.start;
  });
  return m;
}

double backward_spread(const std::vector<pipeline::Span>& spans) {
  double sum = 0, squares = 0;
  int n = 0;
  for (const pipeline::Span& span : spans) {
    if (span.reduction || span.action.kind != pipeline::ActionKind::kBackward) continue;
    const double d = span.end - span.start;
    sum += d, squares += d * d, ++n;
  }
  if (n < 2) return 0;
  const double mean = sum / n;
  return std::sqrt(std::max(0.0, squares / n - mean * mean)) / mean;
}

}  // namespace bench
}  // namespace tessera
