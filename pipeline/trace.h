// Trace: what every stage did when, as a Chrome trace (chrome://tracing, ui.perfetto.dev).
//
// The executor stamps each action of a batch with its start and end (steady clock, seconds):
// computations (F, B) and the waits for messages (RA, RG are the time a stage sat waiting for
// its input: the bubble made visible), and Pipe adds the data-parallel gradient all-reduce.
// gather_trace() collects every rank's spans (a collective); chrome_trace_json() lays them out
// with one track per stage:
//
//   stage 0  [F0][F1][F2][F3]          [B0][B1][B2][B3]
//   stage 1      [RA0][F0][F1][F2][F3][B0][B1][B2][B3]
//
// Ranks on one machine share the steady clock; across machines the tracks are aligned at each
// rank's first span instead.
//
// record_spans() hands a step's spans to the process's trace recorder (dist/trace_recorder.h)
// instead, on this rank's compute track: the train tool's --trace, where every rank's events of
// the selected steps go into one file beside the communication threads' collectives.
#pragma once

#include <string>
#include <vector>

#include "dist/process_group.h"
#include "pipeline/schedule.h"

namespace tessera {
namespace pipeline {

struct Span {
  Action action;           // ignored for a reduction
  bool reduction = false;  // the data-parallel gradient all-reduce
  double start = 0, end = 0;  // seconds
};

// "F3", "RA3.1", "all_reduce"; its category: "forward", "backward", "weight", "send", "recv",
// "reduce".
std::string span_name(const Span& span, bool show_chunk);
const char* span_category(const Span& span);

// Every rank's spans, on every rank, indexed by group rank. Collective over `group`.
std::vector<std::vector<Span>> gather_trace(const std::vector<Span>& mine, dist::ProcessGroup& group);

// The Chrome trace JSON (times in microseconds from the earliest span). `same_clock`: the
// ranks share one steady clock (one machine); otherwise each track starts at its first span.
std::string chrome_trace_json(const std::vector<std::vector<Span>>& spans_per_stage,
                              bool show_chunk = false, bool same_clock = true);

// Adds `spans` (one step's, this rank's) to dist::trace::TraceRecorder::global() in its
// current step, named and categorized as above.
void record_spans(const std::vector<Span>& spans, bool show_chunk = false);

}  // namespace pipeline
}  // namespace tessera
