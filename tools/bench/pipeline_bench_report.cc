#include "tools/bench/pipeline_bench_report.h"

#include <algorithm>
#include <cstdio>

#include "pipeline/timing_model.h"
#include "pipeline/trace_stats.h"

namespace tessera {
namespace bench {

using pipeline::median;  // 0 for no values: waited_ms may have none

void print_bubble_header(const PipelineBenchFlags& flags, int K) {
  std::printf("pipeline_bench: K = %d stages (one rank each, 1 thread), %d x Linear(%lld) + "
              "ReLU, batch %lld, median of %d steps; idle fractions\n", K, flags.layers,
              static_cast<long long>(flags.width), static_cast<long long>(flags.batch),
              flags.steps);
  std::printf("%-12s %3s %6s | %-14s | %-14s | %-14s | %-14s | %11s | %8s\n", "", "", "",
              "measured", "model: stages", "+messages", "replayed", "unexplained", "");
  std::printf("%-12s %3s %6s | %6s %7s | %6s %7s | %6s %7s | %6s %7s | %11s | %8s\n", "schedule",
              "M", "theory", "mean", "bottlen", "mean", "bottlen", "mean", "bottlen", "mean",
              "bottlen", "bottlen", "step ms");
}

void print_bubble_row(const std::string& schedule, int M, int v,
                      const std::vector<double>& stage_idle, const StepSeries& s) {
  const int K = static_cast<int>(stage_idle.size());
  double mean = 0;
  for (double d : stage_idle) mean += d / K;
  const double theory = pipeline::bubble_fraction(K, M, v);
  const double bubble = median(s.bottleneck), replayed_bubble = median(s.replay_bottleneck);
  std::printf("%-12s %3d %6.3f | %6.3f %7.3f | %6.3f %7.3f | %6.3f %7.3f | %6.3f %7.3f | "
              "%+10.0f%% | %8.1f\n", schedule.c_str(), M, theory, mean, bubble,
              median(s.stages_mean), median(s.stages_bottleneck), median(s.full_mean),
              median(s.full_bottleneck), median(s.replay_mean), replayed_bubble,
              100.0 * (bubble - replayed_bubble) / theory, median(s.step_ms));
}

void print_breakdown(const std::vector<double>& stage_idle, const StepSeries& s) {
  std::printf("    idle per stage:");
  for (double d : stage_idle) std::printf(" %.3f", d);
  std::printf("; last step, ms: forward/backward of a chunk");
  for (const pipeline::StageTimes& st : s.last.times) {
    std::printf(" %.2f/%.2f", st.forward * 1e3, st.backward * 1e3);
  }
  std::printf(", send %.3f, receive (arrived) %.3f\n", s.last.messages.costs.send * 1e3,
              s.last.messages.costs.receive * 1e3);
  std::printf("    backward time spread (standard deviation / mean), last step:");
  for (const auto& rank_spans : s.spans) {
    std::printf(" %.1f%%", 100.0 * backward_spread(rank_spans));
  }
  std::printf("\n");
  if (!s.waited_ms.empty()) {
    std::printf("    %zu messages waited for: latency (ms) median %.3f, max %.3f\n",
                s.waited_ms.size(), median(s.waited_ms),
                *std::max_element(s.waited_ms.begin(), s.waited_ms.end()));
  }
  const double last_step_ms = s.step_ms.back();
  for (size_t stage = 0; stage < stage_idle.size(); ++stage) {
    double compute = 0, recv = 0, send = 0;
    for (const pipeline::Span& span : s.spans[stage]) {
      const double ms = (span.end - span.start) * 1e3;
      const std::string category = pipeline::span_category(span);
      if (category == "forward" || category == "backward") compute += ms;
      if (category == "recv") recv += ms;
      if (category == "send") send += ms;
    }
    std::printf("    stage %zu, last step (ms): compute %.1f, recv %.1f, send %.1f, rest %.1f\n",
                stage, compute, recv, send, last_step_ms - compute - recv - send);
  }
}

}  // namespace bench
}  // namespace tessera
