#include "tools/explain/trace_events.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/check.h"

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
  using nlohmann::json;
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::parse_error& e) {
    TS_CHECK(false, "--trace=", path, ": not a JSON file (", e.what(), ")");
  }
  TS_CHECK(doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(),
           "--trace=", path, ": not a Chrome trace (no \"traceEvents\" array); write one with "
           "train --trace=FILE");
  Trace trace;
  trace.path = path;
  const json& events = doc["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    try {
      const std::string ph = e.at("ph").get<std::string>();
      const int rank = e.at("pid").get<int>();
      const int track = e.at("tid").get<int>();
      trace.ranks = std::max(trace.ranks, rank + 1);
      if (ph == "M") {
        if (e.at("name").get<std::string>() == "thread_name") {
          trace.track_names[{rank, track}] = e.at("args").at("name").get<std::string>();
        }
        continue;
      }
      if (ph != "X" && ph != "i") continue;
      TraceEvent t;
      t.name = e.at("name").get<std::string>();
      t.category = e.value("cat", "");
      t.rank = rank;
      t.track = track;
      t.start_ms = e.at("ts").get<double>() / 1e3;
      t.end_ms = t.start_ms + (ph == "X" ? e.at("dur").get<double>() / 1e3 : 0.0);
      if (e.contains("args")) {
        const json& args = e.at("args");
        t.step = args.value("step", int64_t{0});
        t.bucket = args.value("bucket", int64_t{-1});
        t.elements = args.value("elements", int64_t{0});
        t.unit = args.value("unit", "");
        t.layer = args.value("layer", "");
      }
      trace.events.push_back(std::move(t));
    } catch (const json::exception& err) {
      TS_CHECK(false, "--trace=", path, ": event ", i, " of traceEvents: ", err.what());
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
