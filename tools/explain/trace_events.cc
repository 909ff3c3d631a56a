#include "tools/explain/trace_events.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tensor/check.h"
#include "tools/explain/json_value.h"

namespace tessera {
namespace explain {

std::string Trace::track_name(int rank, int track) const {
  const auto it = track_names.find({rank, track});
  return it == track_names.end() ? "track " + std::to_string(track) : it->second;
}

Trace read_trace(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "--trace=", path, ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  JsonValue doc;
  try {
    doc = parse_json(text.str());
  } catch (const Error& e) {
    TS_CHECK(false, "--trace=", path, ": not a JSON file (", e.message(), ")");
  }
  TS_CHECK(doc.is_object() && doc.has("traceEvents") && doc.get("traceEvents").is_array(),
           "--trace=", path, ": not a Chrome trace (no \"traceEvents\" array); write one with "
           "train --trace=FILE");
  Trace trace;
  trace.path = path;
  const std::vector<JsonValue>& events = doc.get("traceEvents").array();
  for (size_t i = 0; i < events.size(); ++i) {
    const JsonValue& e = events[i];
    try {
      const std::string ph = e.get("ph").string();
      const int rank = static_cast<int>(e.get("pid").number());
      const int track = static_cast<int>(e.get("tid").number());
      trace.ranks = std::max(trace.ranks, rank + 1);
      if (ph == "M") {
        if (e.get("name").string() == "thread_name") {
          trace.track_names[{rank, track}] = e.get("args").get("name").string();
        }
        continue;
      }
      if (ph != "X" && ph != "i") continue;
      TraceEvent t;
      t.name = e.get("name").string();
      t.category = e.string_or("cat", "");
      t.rank = rank;
      t.track = track;
      t.start_ms = e.get("ts").number() / 1e3;
      t.end_ms = t.start_ms + (ph == "X" ? e.get("dur").number() / 1e3 : 0.0);
      if (e.has("args")) {
        const JsonValue& args = e.get("args");
        t.step = static_cast<int64_t>(args.number_or("step", 0));
        t.bucket = static_cast<int64_t>(args.number_or("bucket", -1));
        t.elements = static_cast<int64_t>(args.number_or("elements", 0));
        t.unit = args.string_or("unit", "");
        t.layer = args.string_or("layer", "");
      }
      trace.events.push_back(std::move(t));
    } catch (const Error& err) {
      TS_CHECK(false, "--trace=", path, ": event ", i, " of traceEvents: ", err.message());
    }
  }
  TS_CHECK(!trace.events.empty(), "--trace=", path, ": the trace holds no events");
  for (const TraceEvent& t : trace.events) trace.steps.push_back(t.step);
  std::sort(trace.steps.begin(), trace.steps.end());
  trace.steps.erase(std::unique(trace.steps.begin(), trace.steps.end()), trace.steps.end());
  return trace;
}

std::vector<int64_t> select_steps(const Trace& trace, int64_t step) {
  if (step == 0) return trace.steps;
  TS_CHECK(std::find(trace.steps.begin(), trace.steps.end(), step) != trace.steps.end(),
           "--step=", step, ": ", trace.path, " holds steps ", trace.steps);
  return {step};
}

void check_rank(const Trace& trace, int rank) {
  TS_CHECK(rank >= 0 && rank < trace.ranks, "--rank=", rank, ": ", trace.path, " holds ranks 0 to ",
           trace.ranks - 1);
}

}  // namespace explain
}  // namespace tessera
