// Every rank's trace events in one Chrome trace file (trace_recorder.h records them).
//
// gather_events() brings each rank's events and track names to rank 0 (two byte all-gathers,
// gather_bytes.h); chrome_trace_json() lays them out, one process per rank and one thread per
// track, times in microseconds from the earliest event:
//
//   {"traceEvents":[
//   {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"rank 1"}},
//   {"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"comm thread 2"}},
//   {"name":"all_reduce bucket 0","cat":"all_reduce","ph":"X","ts":812.250,"dur":95.500,
//    "pid":1,"tid":2,"args":{"step":3,"bucket":0,"elements":2826}},
//   {"name":"launch bucket 0","cat":"launch","ph":"i","s":"t","ts":810.125,"pid":1,"tid":0,...}
//   ],"displayTimeUnit":"ms"}
//
// One event per line. Every event's args hold its step. Ranks on one machine share the steady
// clock; ranks on other hosts than rank 0's are shifted so that the ends of a barrier line up.
#pragma once

#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/trace_recorder.h"

namespace tessera {
namespace dist {
namespace trace {

struct RankTrace {
  std::vector<std::string> tracks;  // index: track number
  std::vector<Event> events;
};

// The Chrome trace of every rank's events (index: rank).
std::string chrome_trace_json(const std::vector<RankTrace>& ranks);

// Collective over `group`: every rank's recorded events, on rank 0 (empty elsewhere), on the
// clock of rank 0.
std::vector<RankTrace> gather_events(const TraceRecorder& recorder, ProcessGroup& group);

// Collective over `group` (null: this process alone): gathers the recorder's events and rank 0
// writes them to `path`. Throws naming the file when it cannot be written. Returns the number
// of events written (on rank 0; 0 elsewhere).
size_t write_chrome_trace(const std::string& path, const TraceRecorder& recorder,
                          ProcessGroup* group);

}  // namespace trace
}  // namespace dist
}  // namespace tessera
