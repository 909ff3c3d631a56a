#include "tools/explain/run_directory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tensor/check.h"
#include "tools/explain/metrics_runs.h"

namespace tessera {
namespace explain {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A value as the settings table shows it: strings bare, numbers and booleans as JSON writes them.
std::string shown(const nlohmann::ordered_json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// A --metrics file: its first line is a step or epoch line.
bool looks_like_metrics(const std::string& text) {
  const json first = json::parse(text.substr(0, text.find('\n')), nullptr, false);
  return first.is_object() && first.contains("kind") && first["kind"].is_string();
}

bool looks_like_trace(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  return j.is_object() && j.contains("traceEvents");
}

}  // namespace

std::string RunSummaryLine::setting(const std::string& key) const {
  for (const auto& [k, v] : settings) {
    if (k == key) return v;
  }
  return "";
}

std::optional<RunSummaryLine> parse_run_summary(const std::string& text, const std::string& path) {
  std::istringstream lines(text);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("model") && j.contains("strategy") && j.contains("world_size")) last = line;
  }
  if (last.empty()) return std::nullopt;
  // ordered_json: the settings in the order the train tool wrote them.
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(last);
  RunSummaryLine s;
  s.path = path;
  for (const auto& [key, value] : j.items()) {
    if (value.is_primitive() && !value.is_null()) s.settings.push_back({key, shown(value)});
  }
  try {
    if (j.contains("memory")) {
      const auto& m = j.at("memory");
      if (m.contains("model_state_predicted")) s.model_state_predicted = m.at("model_state_predicted").get<int64_t>();
      for (const auto& r : m.value("per_rank", nlohmann::ordered_json::array())) {
        s.memory_per_rank.push_back({r.at("rank").get<int>(), r.at("params").get<int64_t>(),
                                     r.at("grads").get<int64_t>(), r.at("optimizer").get<int64_t>(),
                                     r.at("model_state").get<int64_t>(), r.at("peak").get<int64_t>()});
      }
    }
    for (const auto& c : j.value("comm_per_step", nlohmann::ordered_json::array())) {
      s.comm_per_step.push_back({c.at("collective").get<std::string>(), c.at("calls").get<double>(),
                                 c.at("bytes").get<double>()});
    }
  } catch (const json::exception& e) {
    TS_CHECK(false, path, ": the run's summary line is not as the train tool writes it (", e.what(), ")");
  }
  return s;
}

RunDirectory read_run_directory(const std::string& path) {
  TS_CHECK(fs::is_directory(path), path, ": not a directory (explain report reads the directory "
           "a run wrote its --metrics, --trace and standard output into)");
  RunDirectory run;
  run.path = path;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string text = read_text(f);
    if (f.filename() == "command.txt") {
      run.command = text;
    } else if (looks_like_metrics(text)) {
      run.metrics.push_back(f.string());
    } else if (looks_like_trace(text)) {
      run.traces.push_back(f.string());
    } else if (auto s = parse_run_summary(text, f.string())) {
      TS_CHECK(!run.summary, path, ": two files hold a run's final JSON line (", run.summary->path,
               " and ", f.string(), "); a report is of one run");
      run.summary = std::move(s);
    }
  }
  TS_CHECK(!run.metrics.empty() || !run.traces.empty() || run.summary, path,
           ": no --metrics file, trace or train output found (train --metrics=", path,
           "/metrics.jsonl --trace=", path, "/trace.json > ", path, "/stdout.txt)");
  return run;
}

}  // namespace explain
}  // namespace tessera
