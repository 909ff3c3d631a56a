#include "tools/explain/ddp_timeline.h"

#include <algorithm>

#include "tensor/check.h"

namespace tessera {
namespace explain {

double overlap(double a0, double a1, double b0, double b1) {
  return std::max(0.0, std::min(a1, b1) - std::max(a0, b0));
}

double DdpStep::communication_ms() const {
  double total = 0;
  for (const DdpBucket& b : buckets) total += b.communication_ms;
  return total;
}

double DdpStep::hidden_ms() const {
  double total = 0;
  for (const DdpBucket& b : buckets) total += b.hidden_ms;
  return total;
}

double DdpStep::overlap_fraction() const {
  const double c = communication_ms();
  return c > 0 ? hidden_ms() / c : 0.0;
}

int DdpStep::layers() const {
  int n = 0;
  for (const TraceEvent* e : compute) n += e->category == "backward";
  return n;
}

DdpStep ddp_step(const Trace& trace, int rank, int64_t step) {
  DdpStep s;
  s.rank = rank;
  s.step = step;
  bool backward = false;
  for (const TraceEvent& e : trace.events) {
    if (e.rank != rank || e.step != step || e.track != 0) continue;
    if (e.category == "forward" || e.category == "backward" || e.category == "wait") {
      s.compute.push_back(&e);
    }
    if (e.category == "backward") {
      s.backward_start_ms = backward ? std::min(s.backward_start_ms, e.start_ms) : e.start_ms;
      s.backward_end_ms = backward ? std::max(s.backward_end_ms, e.end_ms) : e.end_ms;
      backward = true;
    }
    if (e.category == "wait") s.exposed_ms += e.ms();
  }
  // A bucket's collectives (one all-reduce; a communication hook may issue more under the same
  // name): from the first one's start to the last one's end, the time of each counted.
  for (const TraceEvent& e : trace.events) {
    if (e.rank != rank || e.step != step || e.bucket < 0) continue;
    if (static_cast<int64_t>(s.buckets.size()) <= e.bucket) s.buckets.resize(e.bucket + 1);
    DdpBucket& b = s.buckets[e.bucket];
    const bool first = b.collectives == 0;
    b.index = e.bucket;
    b.elements = e.elements;
    if (e.category == "launch") b.launch_ms = e.start_ms;
    if (e.track == 0) continue;
    b.start_ms = first ? e.start_ms : std::min(b.start_ms, e.start_ms);
    b.end_ms = first ? e.end_ms : std::max(b.end_ms, e.end_ms);
    b.communication_ms += e.ms();
    b.hidden_ms += overlap(e.start_ms, e.end_ms, s.backward_start_ms, s.backward_end_ms);
    ++b.collectives;
  }
  TS_CHECK(!s.buckets.empty() && backward, trace.path, " has no DDP buckets and backward layers "
           "for rank ", rank, " in step ", step, ": write the trace with train --strategy=ddp "
           "--trace=FILE");
  std::sort(s.compute.begin(), s.compute.end(),
            [](const TraceEvent* a, const TraceEvent* b) { return a->start_ms < b->start_ms; });
  return s;
}

}  // namespace explain
}  // namespace tessera
