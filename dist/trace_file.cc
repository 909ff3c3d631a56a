#include "dist/trace_file.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
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

std::string json_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

}  // namespace

std::string chrome_trace_json(const std::vector<RankTrace>& ranks) {
  double origin = std::numeric_limits<double>::infinity();
  for (const RankTrace& r : ranks) {
    for (const Event& e : r.events) origin = std::min(origin, e.start);
  }
  std::ostringstream os;
  os << "{\"traceEvents\":[";
  const char* sep = "\n";
  char line[160];
  for (size_t r = 0; r < ranks.size(); ++r) {
    os << sep << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r
       << ",\"tid\":0,\"args\":{\"name\":\"rank " << r << "\"}}";
    sep = ",\n";
    os << sep << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << r
       << ",\"tid\":0,\"args\":{\"sort_index\":" << r << "}}";
    for (size_t k = 0; k < ranks[r].tracks.size(); ++k) {
      os << sep << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << r << ",\"tid\":" << k
         << ",\"args\":{\"name\":\"" << json_escaped(ranks[r].tracks[k]) << "\"}}";
    }
    for (const Event& e : ranks[r].events) {
      os << sep << "{\"name\":\"" << json_escaped(e.name) << "\",\"cat\":\""
         << json_escaped(e.category) << "\",";
      if (e.instant()) {
        std::snprintf(line, sizeof(line), "\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,",
                      (e.start - origin) * 1e6);
      } else {
        std::snprintf(line, sizeof(line), "\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,",
                      (e.start - origin) * 1e6, (e.end - e.start) * 1e6);
      }
      os << line << "\"pid\":" << r << ",\"tid\":" << e.track << ",\"args\":{\"step\":" << e.step
         << (e.args.empty() ? "" : ",") << e.args << "}}";
    }
  }
  os << "\n],\"displayTimeUnit\":\"ms\"}\n";
  return os.str();
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
