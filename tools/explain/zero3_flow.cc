#include "tools/explain/zero3_flow.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace explain {

Zero3Step zero3_step(const Trace& trace, int rank, int64_t step) {
  Zero3Step s;
  s.rank = rank;
  s.step = step;
  for (const TraceEvent& e : trace.events) {
    if (e.rank == rank && e.step == step && !e.unit.empty()) s.flow.push_back(&e);
  }
  TS_CHECK(!s.flow.empty(), trace.path, " has no ZeRO-3 unit events for rank ", rank, " in step ",
           step, ": write the trace with train --strategy=zero3 --trace=FILE");
  // Ties (an instant at a span's end) keep the file's order, which is the order recorded.
  std::stable_sort(s.flow.begin(), s.flow.end(),
                   [](const TraceEvent* a, const TraceEvent* b) { return a->start_ms < b->start_ms; });
  s.step_start_ms = s.flow.front()->start_ms;
  for (const TraceEvent& e : trace.events) {
    if (e.rank == rank && e.step == step) s.step_start_ms = std::min(s.step_start_ms, e.start_ms);
  }
  for (const TraceEvent* e : s.flow) {
    auto it = std::find_if(s.units.begin(), s.units.end(),
                           [&](const Zero3Unit& u) { return u.name == e->unit; });
    if (it == s.units.end()) {
      s.units.push_back(Zero3Unit());
      it = s.units.end() - 1;
      it->name = e->unit;
    }
    if (e->elements > 0) it->elements = e->elements;
    if (e->category == "all_gather") {
      ++it->gathers;
      it->gather_ms += e->ms();
    } else if (e->category == "reduce_scatter") {
      ++it->reduce_scatters;
      it->reduce_scatter_ms += e->ms();
    } else if (e->category == "free") {
      ++it->frees;
    } else if (e->category == "forward") {
      it->forward_ms += e->ms();
    } else if (e->category == "backward") {
      it->backward_ms += e->ms();
    }
  }
  return s;
}

}  // namespace explain
}  // namespace tessera
