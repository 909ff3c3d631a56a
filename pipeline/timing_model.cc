#include "pipeline/timing_model.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "tensor/check.h"

namespace tessera {
namespace pipeline {

double TimedStep::mean_idle() const {
  double sum = 0;
  for (size_t s = 0; s < busy.size(); ++s) sum += idle_fraction(static_cast<int>(s));
  return busy.empty() ? 0 : sum / busy.size();
}

double TimedStep::bottleneck_idle() const {
  return busy.empty() ? 0 : 1.0 - *std::max_element(busy.begin(), busy.end()) / makespan;
}

TimedStep play_timed(const std::vector<std::vector<Action>>& lists, int chunks,
                     const std::vector<StageTimes>& times) {
  const int K = static_cast<int>(lists.size());
  TS_CHECK(K >= 1 && chunks >= 1, "play_timed: ", K, " stages and ", chunks, " chunks");
  TS_CHECK(static_cast<int>(times.size()) == K, "play_timed: ", times.size(), " stage times for ",
           K, " stages");
  const int last_virtual = K * chunks - 1;
  // When each computation ended: (kind, micro-batch, virtual stage).
  std::map<std::tuple<ActionKind, int, int>, double> ended;
  const auto input_ready = [&](ActionKind kind, int mb, int j, double* at) {
    std::vector<std::tuple<ActionKind, int, int>> needs;
    if (kind == ActionKind::kForward && j > 0) needs.emplace_back(ActionKind::kForward, mb, j - 1);
    if (kind == ActionKind::kBackward) {
      needs.emplace_back(ActionKind::kForward, mb, j);
      if (j < last_virtual) needs.emplace_back(ActionKind::kBackward, mb, j + 1);
    }
    *at = 0;
    for (const auto& n : needs) {
      const auto it = ended.find(n);
      if (it == ended.end()) return false;
      *at = std::max(*at, it->second);
    }
    return true;
  };
  TimedStep step;
  step.busy.assign(K, 0);
  std::vector<double> clock(K, 0);
  std::vector<size_t> at(K, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < K; ++s) {
      for (; at[s] < lists[s].size(); ++at[s], moved = true) {
        const Action& a = lists[s][at[s]];
        if (!is_compute(a.kind)) continue;  // messages are free
        const int j = a.chunk * K + s;      // the virtual stage
        double ready;
        if (!input_ready(a.kind, a.microbatch, j, &ready)) break;
        const double t = a.kind == ActionKind::kForward ? times[s].forward : times[s].backward;
        clock[s] = std::max(clock[s], ready) + t;
        step.busy[s] += t;
        ended[{a.kind, a.microbatch, j}] = clock[s];
      }
    }
  }
  for (int s = 0; s < K; ++s) {
    TS_CHECK(at[s] == lists[s].size(), "play_timed: stage ", s, " cannot run ",
             to_string(lists[s][at[s]], chunks > 1), ": an input it needs is never computed");
  }
  step.makespan = *std::max_element(clock.begin(), clock.end());
  return step;
}

}  // namespace pipeline
}  // namespace tessera
