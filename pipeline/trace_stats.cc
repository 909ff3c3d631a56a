#include "pipeline/trace_stats.h"

#include <algorithm>

namespace tessera {
namespace pipeline {
namespace {

std::vector<Span> of_kind(const std::vector<Span>& spans, ActionKind kind) {
  std::vector<Span> out;
  for (const Span& span : spans) {
    if (!span.reduction && span.action.kind == kind) out.push_back(span);
  }
  return out;
}

double mean_duration(const std::vector<Span>& spans) {
  double sum = 0;
  for (const Span& span : spans) sum += span.end - span.start;
  return spans.empty() ? 0 : sum / spans.size();
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

StageTimes stage_times(const std::vector<Span>& spans) {
  // With W spans (a zero-bubble list) a B span is only the input gradient: the whole backward
  // is B + W (timing_model.h's convention).
  const double weight = mean_duration(of_kind(spans, ActionKind::kWeight));
  return {mean_duration(of_kind(spans, ActionKind::kForward)),
          mean_duration(of_kind(spans, ActionKind::kBackward)) + weight, weight};
}

MessageStats message_stats(const std::vector<std::vector<Span>>& all) {
  const int K = static_cast<int>(all.size());
  std::vector<double> sends, copies;
  MessageStats stats;
  for (int r = 0; r < K; ++r) {
    for (const bool activation : {true, false}) {
      const int sender = activation ? (r + K - 1) % K : (r + 1) % K;
      const auto sent = of_kind(all[sender], activation ? ActionKind::kSendActivation
                                                        : ActionKind::kSendGradient);
      const auto received = of_kind(all[r], activation ? ActionKind::kRecvActivation
                                                       : ActionKind::kRecvGradient);
      for (const Span& s : sent) sends.push_back(s.end - s.start);
      for (size_t n = 0; n < std::min(sent.size(), received.size()); ++n) {
        const Span& s = sent[n];
        const Span& rcv = received[n];
        if (rcv.start >= s.end) copies.push_back(rcv.end - rcv.start);
        if (rcv.start <= s.start) stats.waited.push_back(rcv.end - s.start);
      }
    }
  }
  stats.costs = {median(sends), median(copies)};
  return stats;
}

}  // namespace pipeline
}  // namespace tessera
