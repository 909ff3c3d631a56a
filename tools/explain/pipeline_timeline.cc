#include "tools/explain/pipeline_timeline.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "tensor/check.h"

namespace tessera {
namespace explain {

using pipeline::Action;
using pipeline::ActionKind;

std::vector<TimedCell> timed_cells(const std::vector<std::vector<Action>>& lists, int chunks,
                                   const pipeline::StageTimes& times) {
  const int k = static_cast<int>(lists.size());
  const int last = k * chunks - 1;
  const bool split = pipeline::splits_backward(lists[0]);
  // When each computation ended, by (kind, micro-batch, virtual stage).
  std::map<std::tuple<ActionKind, int, int>, double> ended;
  // The computation an action waits for (none: -1 in the stage slot).
  auto input = [&](const Action& a, int j) -> std::tuple<ActionKind, int, int> {
    switch (a.kind) {
      case ActionKind::kRecvActivation:
      case ActionKind::kForward: return {ActionKind::kForward, a.microbatch, j - 1};
      case ActionKind::kRecvGradient: return {ActionKind::kBackward, a.microbatch, j + 1};
      case ActionKind::kBackward: return {ActionKind::kBackward, a.microbatch, j < last ? j + 1 : -1};
      case ActionKind::kWeight: return {ActionKind::kBackward, a.microbatch, j};
      case ActionKind::kSendGradient: return {ActionKind::kBackward, a.microbatch, j};
      default: return {ActionKind::kForward, a.microbatch, j};  // kSendActivation
    }
  };
  auto duration = [&](ActionKind kind) {
    if (kind == ActionKind::kForward) return times.forward;
    if (kind == ActionKind::kBackward) return split ? times.backward - times.weight : times.backward;
    return kind == ActionKind::kWeight ? times.weight : 0.0;
  };
  std::vector<TimedCell> cells;
  std::vector<double> clock(k, 0);
  std::vector<size_t> at(k, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < k; ++s) {
      for (; at[s] < lists[s].size(); ++at[s], moved = true) {
        const Action& a = lists[s][at[s]];
        const int j = a.chunk * k + s;
        double ready = 0;
        const auto need = input(a, j);
        if (std::get<2>(need) >= 0 && std::get<2>(need) <= last) {
          const auto it = ended.find(need);
          if (it == ended.end()) break;
          ready = it->second;
        }
        // A backward's own forward, a send's computation: always earlier on this list.
        const double start = std::max(clock[s], ready);
        clock[s] = start + duration(a.kind);
        if (pipeline::is_compute(a.kind)) {
          ended[{a.kind, a.microbatch, j}] = clock[s];
          cells.push_back({s, a, start, clock[s] - start});
        }
      }
    }
  }
  for (int s = 0; s < k; ++s) {
    TS_CHECK(at[s] == lists[s].size(), "pipeline timeline: stage ", s, " cannot run ",
             pipeline::to_string(lists[s][at[s]], chunks > 1));
  }
  return cells;
}

}  // namespace explain
}  // namespace tessera
