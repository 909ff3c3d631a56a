// A training run's output directory, as `explain report RUN` reads it: the files the train tool
// wrote there, found by what they hold, not by their names:
//
//   RUN/*.jsonl     --metrics=FILE: a JSON line per step and per epoch (metrics_runs.h)
//   RUN/*.json      --trace=FILE: a Chrome trace, {"traceEvents": [...]} (trace_events.h)
//   RUN/*           the tool's standard output saved (train ... > RUN/stdout.txt): its last line
//                   is the final JSON summary, {"model": ..., "strategy": ..., "world_size": ...}
//   RUN/command.txt the command that ran, if the user saved it (the train tool does not record
//                   its own command line)
//
// The summary is read with nlohmann/json: its settings (every scalar field), the memory each rank
// measured beside the prediction ("memory"), and the bytes per collective ("comm_per_step").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace explain {

struct RankModelStates {
  int rank = 0;
  int64_t parameters = 0, gradients = 0, optimizer = 0, model_state = 0, peak = 0;
};

struct CollectiveBytes {
  std::string collective;
  double calls = 0, bytes = 0;  // per training step, rank 0
};

struct RunSummaryLine {
  std::string path;  // the file whose last summary line this is
  // Every field whose value is a string, number or boolean, in the file's order, as text.
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<RankModelStates> memory_per_rank;     // empty when the run measured none
  std::optional<int64_t> model_state_predicted;  // the formula's, one rank
  std::vector<CollectiveBytes> comm_per_step;  // empty on one process
  std::string setting(const std::string& key) const;  // "" when absent
};

struct RunDirectory {
  std::string path;
  std::vector<std::string> metrics, traces;  // sorted by name
  std::optional<RunSummaryLine> summary;
  std::string command;  // command.txt's text, or ""
};

// Throws naming the directory when it is not one, or holds none of these files.
RunDirectory read_run_directory(const std::string& path);

// The last line of `text` that is a JSON object with "model", "strategy" and "world_size", read;
// nullopt when there is none. `path` names the file in errors.
std::optional<RunSummaryLine> parse_run_summary(const std::string& text, const std::string& path);

}  // namespace explain
}  // namespace tessera
