#include "dist/trace_file.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dist/gather_bytes.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace trace {
namespace {

// One field per tab, one event per line; our names and args hold neither.
std::string clean(std::string s) {
  std::replace(s.begin(), s.end(), '\t', ' ');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(s);
  while (std::getline(in, field, sep)) out.push_back(field);
  return out;
}

std::string pack(const RankTrace& t) {
  std::ostringstream os;
  for (size_t k = 0; k < t.tracks.size(); ++k) os << (k ? "\t" : "") << clean(t.tracks[k]);
  os << '\n';
  char times[64];
  for (const Event& e : t.events) {
    std::snprintf(times, sizeof(times), "%.9f\t%.9f", e.start, e.end);
    os << clean(e.name) << '\t' << clean(e.category) << '\t' << e.track << '\t' << e.step << '\t'
       << times << '\t' << clean(e.args) << '\n';
  }
  return os.str();
}

RankTrace unpack(const std::string& bytes, double shift) {
  RankTrace t;
  std::istringstream in(bytes);
  std::string line;
  std::getline(in, line);
  t.tracks = split(line, '\t');
  while (std::getline(in, line)) {
    std::vector<std::string> f = split(line, '\t');
    if (f.size() == 6) f.push_back("");  // empty args
    TS_INTERNAL_ASSERT(f.size() == 7);
    Event e;
    e.name = f[0];
    e.category = f[1];
    e.track = std::stoi(f[2]);
    e.step = std::stoll(f[3]);
    e.start = std::stod(f[4]) + shift;
    e.end = std::stod(f[5]) + shift;
    e.args = f[6];
    t.events.push_back(std::move(e));
  }
  return t;
}

// Microseconds from the trace's origin, to the nanosecond (Chrome's ts and dur).
double microseconds(double seconds) { return std::round(seconds * 1e9) / 1e3; }

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

}  // namespace

std::string chrome_trace_json(const std::vector<RankTrace>& ranks) {
  using json = nlohmann::ordered_json;  // fields in Chrome's usual order
  double origin = std::numeric_limits<double>::infinity();
  for (const RankTrace& r : ranks) {
    for (const Event& e : r.events) origin = std::min(origin, e.start);
  }
  // Written an event a line (dump() of each), so that a trace reads and diffs line by line.
  std::string out = "{\"traceEvents\":[";
  const char* sep = "\n";
  auto add = [&](const json& event) {
    out += sep + event.dump();
    sep = ",\n";
  };
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int pid = static_cast<int>(r);
    add({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
         {"args", {{"name", "rank " + std::to_string(r)}}}});
    add({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
         {"args", {{"sort_index", pid}}}});
    for (size_t k = 0; k < ranks[r].tracks.size(); ++k) {
      add({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", static_cast<int>(k)},
           {"args", {{"name", ranks[r].tracks[k]}}}});
    }
    for (const Event& e : ranks[r].events) {
      json event = {{"name", e.name}, {"cat", e.category}};
      if (e.instant()) {
        event["ph"] = "i";
        event["s"] = "t";
        event["ts"] = microseconds(e.start - origin);
      } else {
        event["ph"] = "X";
        event["ts"] = microseconds(e.start - origin);
        event["dur"] = microseconds(e.end - e.start);
      }
      event["pid"] = pid;
      event["tid"] = e.track;
      json args = {{"step", e.step}};
      args.update(json::parse("{" + e.args + "}"));  // the recorder's own fields
      event["args"] = std::move(args);
      add(event);
    }
  }
  return out + "\n],\"displayTimeUnit\":\"ms\"}\n";
}

std::vector<RankTrace> gather_events(const TraceRecorder& recorder, ProcessGroup& group) {
  // The clocks: a barrier's end is (nearly) one instant on every rank; a rank on another host
  // than rank 0's is shifted by the difference of its reading from rank 0's.
  group.barrier()->wait();
  char clock[64];
  std::snprintf(clock, sizeof(clock), "%.9f", steady_seconds());
  const std::vector<std::string> clocks =
      all_gather_bytes(host_name() + "\t" + clock, group);
  const std::vector<std::string> packed =
      all_gather_bytes(pack({recorder.track_names(), recorder.events()}), group);
  if (group.rank() != 0) return {};
  std::vector<RankTrace> out;
  const std::vector<std::string> lead = split(clocks[0], '\t');
  for (size_t r = 0; r < packed.size(); ++r) {
    const std::vector<std::string> mine = split(clocks[r], '\t');
    const double shift = mine[0] == lead[0] ? 0.0 : std::stod(lead[1]) - std::stod(mine[1]);
    out.push_back(unpack(packed[r], shift));
  }
  return out;
}

size_t write_chrome_trace(const std::string& path, const TraceRecorder& recorder,
                          ProcessGroup* group) {
  std::vector<RankTrace> ranks;
  if (group != nullptr) {
    ranks = gather_events(recorder, *group);
    if (group->rank() != 0) return 0;
  } else {
    ranks.push_back({recorder.track_names(), recorder.events()});
  }
  std::ofstream out(path);
  out << chrome_trace_json(ranks);
  out.flush();
  TS_CHECK(out.good(), "cannot write the trace file '", path, "'");
  size_t events = 0;
  for (const RankTrace& r : ranks) events += r.events.size();
  return events;
}

}  // namespace trace
}  // namespace dist
}  // namespace tessera
