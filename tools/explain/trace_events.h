// A Chrome trace as the train tool writes it (--trace; dist/trace_file.h), read back: every
// rank's events with their track, step and the arguments explain's views use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace explain {

struct TraceEvent {
  std::string name, category;  // "all_reduce bucket 1", "all_reduce"
  int rank = 0, track = 0;     // pid, tid: track 0 is the rank's compute thread
  int64_t step = 0;
  double start_ms = 0, end_ms = 0;  // from the trace's origin; equal for an instant
  // From the event's args, when present.
  int64_t bucket = -1, elements = 0;
  std::string unit, layer;
  double ms() const { return end_ms - start_ms; }
};

struct Trace {
  std::string path;
  std::vector<TraceEvent> events;  // in file order
  std::map<std::pair<int, int>, std::string> track_names;  // (rank, track) -> "comm thread 1"
  int ranks = 0;
  std::vector<int64_t> steps;  // the steps the events belong to, ascending
  std::string track_name(int rank, int track) const;
};

// Throws naming the file when it cannot be read, is not JSON, or holds no trace events.
Trace read_trace(const std::string& path);

// The steps to show: `step` (0: every step of the trace). Throws naming the steps the trace
// holds when `step` is not one of them.
std::vector<int64_t> select_steps(const Trace& trace, int64_t step);
// Throws naming the ranks the trace holds when `rank` is not one of them.
void check_rank(const Trace& trace, int rank);

}  // namespace explain
}  // namespace tessera
