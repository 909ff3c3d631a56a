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

double TimedStep::bubble() const {
  return busy.empty() ? 0 : makespan - *std::max_element(busy.begin(), busy.end());
}

double TimedStep::bubble_without_flush() const {
  if (busy.empty()) return 0;
  return *std::max_element(span.begin(), span.end()) - *std::max_element(busy.begin(), busy.end());
}

double zb_h1_bubble(int stages, const StageTimes& t) {
  return (stages - 1) * (t.forward + (t.backward - t.weight) - t.weight);
}

TimedStep play_timed(const std::vector<std::vector<Action>>& lists, int chunks,
                     const std::vector<StageTimes>& times, const MessageCosts& costs) {
  TS_CHECK(times.size() == lists.size(), "play_timed: ", times.size(), " stage times for ",
           lists.size(), " stages");
  std::vector<bool> split(lists.size());
  for (size_t s = 0; s < lists.size(); ++s) {
    TS_CHECK(times[s].weight >= 0 && times[s].weight <= times[s].backward, "play_timed: stage ", s,
             "'s weight-gradient time ", times[s].weight, " is not within its backward's [0, ",
             times[s].backward, "]");
    split[s] = splits_backward(lists[s]);
  }
  return play_timed(lists, chunks, [&](int s, size_t n) {
    switch (lists[s][n].kind) {
      case ActionKind::kForward: return times[s].forward;
      // With W split out, B is the input-gradient part of the backward.
      case ActionKind::kBackward: return split[s] ? times[s].backward - times[s].weight : times[s].backward;
      case ActionKind::kWeight: return times[s].weight;
      case ActionKind::kSendActivation:
      case ActionKind::kSendGradient: return costs.send;
      default: return costs.receive;
    }
  });
}

TimedStep play_timed(const std::vector<std::vector<Action>>& lists, int chunks,
                     const ActionDuration& duration) {
  const int K = static_cast<int>(lists.size());
  TS_CHECK(K >= 1 && chunks >= 1, "play_timed: ", K, " stages and ", chunks, " chunks");
  const int last_virtual = K * chunks - 1;
  // When each action ended, by (kind, micro-batch, virtual stage).
  std::map<std::tuple<ActionKind, int, int>, double> ended;
  // What an action needs done first, on this rank or another: a computation's inputs (F i of
  // virtual stage j: F i of j-1; B i: its own F i and B i of j+1; W i: its own B i), a
  // receive's send.
  const auto needs = [&](const Action& a, int j) {
    std::vector<std::tuple<ActionKind, int, int>> n;
    const int mb = a.microbatch;
    switch (a.kind) {
      case ActionKind::kForward:
        if (j > 0) n.emplace_back(ActionKind::kForward, mb, j - 1);
        break;
      case ActionKind::kBackward:
        n.emplace_back(ActionKind::kForward, mb, j);
        if (j < last_virtual) n.emplace_back(ActionKind::kBackward, mb, j + 1);
        break;
      case ActionKind::kRecvActivation: n.emplace_back(ActionKind::kSendActivation, mb, j - 1); break;
      case ActionKind::kRecvGradient: n.emplace_back(ActionKind::kSendGradient, mb, j + 1); break;
      case ActionKind::kSendActivation: n.emplace_back(ActionKind::kForward, mb, j); break;
      case ActionKind::kSendGradient: n.emplace_back(ActionKind::kBackward, mb, j); break;
      case ActionKind::kWeight: n.emplace_back(ActionKind::kBackward, mb, j); break;
    }
    return n;
  };
  TimedStep step;
  step.busy.assign(K, 0);
  std::vector<double> clock(K, 0), first_start(K, -1), last_end(K, 0);
  std::vector<size_t> at(K, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < K; ++s) {
      for (; at[s] < lists[s].size(); ++at[s], moved = true) {
        const Action& a = lists[s][at[s]];
        const int j = a.chunk * K + s;  // the virtual stage
        double ready = 0;
        bool missing = false;
        for (const auto& n : needs(a, j)) {
          const auto it = ended.find(n);
          missing = missing || it == ended.end();
          if (!missing) ready = std::max(ready, it->second);
        }
        if (missing) break;
        const double t = duration(s, at[s]);
        const double start = std::max(clock[s], ready);
        clock[s] = start + t;
        if (is_compute(a.kind)) {
          step.busy[s] += t;
          if (first_start[s] < 0) first_start[s] = start;
          last_end[s] = clock[s];
        }
        ended[{a.kind, a.microbatch, j}] = clock[s];
      }
    }
  }
  for (int s = 0; s < K; ++s) {
    TS_CHECK(at[s] == lists[s].size(), "play_timed: stage ", s, " cannot run ",
             to_string(lists[s][at[s]], chunks > 1), ": an input it needs is never computed");
  }
  step.makespan = *std::max_element(clock.begin(), clock.end());
  for (int s = 0; s < K; ++s) step.span.push_back(first_start[s] < 0 ? 0 : last_end[s] - first_start[s]);
  return step;
}

double predicted_bubble(ScheduleKind kind, int stages, int microbatches, int chunks,
                        std::string* formula) {
  if (kind != ScheduleKind::kZBH1 && kind != ScheduleKind::kZBH2) {
    if (formula) *formula = "(K-1)/(vM+K-1)";
    return bubble_fraction(stages, microbatches, chunks);
  }
  if (formula) *formula = std::string(schedule_name(kind)) + " played with F = B = W (timing model)";
  const std::vector<StageTimes> times(stages, StageTimes{1, 2, 1});
  return play_timed(make_schedules(kind, stages, microbatches, chunks), chunks, times).mean_idle();
}

}  // namespace pipeline
}  // namespace tessera
