// One DDP step read from a trace (train --strategy=ddp --trace): the lecture's data-parallel
// picture, backward layer by layer on the compute thread and each bucket's all-reduce on the
// communication thread, and how much of that communication backward hid:
//
//   compute  [forward][bwd fc2][ bwd fc1 ...........][wait]
//   comm                       [all_reduce bucket 0]  [all_reduce bucket 1]
//                              |<- hidden: inside backward ->|<- exposed ->|
//
// backward: the first layer span's start to the last one's end (the last gradient); a bucket's
// hidden time is the part of its all-reduce inside that interval; the overlap fraction is the
// buckets' hidden time over their whole all-reduce time; exposed is the wait after backward
// until every bucket was averaged (DDP's "wait for buckets" span).
#pragma once

#include <string>
#include <vector>

#include "tools/explain/trace_events.h"

namespace tessera {
namespace explain {

struct DdpBucket {
  int64_t index = 0, elements = 0;
  double launch_ms = 0;              // when backward launched it
  double start_ms = 0, end_ms = 0;   // its collectives on the communication thread
  double communication_ms = 0;       // their durations
  double hidden_ms = 0;              // of that, inside backward
  int collectives = 0;
};

struct DdpStep {
  int rank = 0;
  int64_t step = 0;
  std::vector<const TraceEvent*> compute;  // forward, backward layers, wait: in time order
  std::vector<DdpBucket> buckets;          // in bucket order
  double backward_start_ms = 0, backward_end_ms = 0;
  double exposed_ms = 0;  // the wait for the buckets after backward
  double communication_ms() const;
  double hidden_ms() const;
  double overlap_fraction() const;  // hidden / communication (0 without communication)
  int layers() const;
};

// The DDP step `step` of `rank`. Throws naming the file when the trace has no DDP buckets
// there (a trace of another strategy).
DdpStep ddp_step(const Trace& trace, int rank, int64_t step);

// The overlap of [a0, a1] with [b0, b1] (0 when disjoint).
double overlap(double a0, double a1, double b0, double b1);

}  // namespace explain
}  // namespace tessera
