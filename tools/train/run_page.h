// --report=FILE.html: the run's page, made when it ends by explain report's library
// (tools/explain/html_report.h) from what the run wrote: its --metrics lines, its trace of the
// last step, its final JSON line and its own command line. The same page as
//
//   train ... --metrics=RUN/metrics.jsonl --trace=RUN/trace.json > RUN/stdout.txt
//   explain report RUN --html=FILE.html
//
// without the directory: a run given --report but not --metrics or --trace writes them into a
// directory of rank 0's own under TMPDIR, removed once the page is written.
#pragma once

#include <string>

#include "tools/train/flags.h"

namespace tessera {
namespace train {

class RunPage {
 public:
  // Every rank makes one from the parsed flags (tracing is collective); rank 0 (`lead`) makes
  // the temporary directory when the page needs one.
  RunPage(const Config& given, bool lead);
  ~RunPage();  // removes the temporary directory
  RunPage(const RunPage&) = delete;
  RunPage& operator=(const RunPage&) = delete;

  // The flags the run goes on with: --metrics and --trace set where the page needs them.
  const Config& config() const { return config_; }
  // The trace is the user's (--trace): say where it went. False when only the page reads it.
  bool trace_is_users() const { return !given_trace_.empty(); }
  // Rank 0, after the final JSON line `summary`: writes the page and says so on stdout.
  // Nothing without --report.
  void write(const std::string& summary) const;

 private:
  Config config_;
  std::string given_trace_;
  std::string temporary_;  // the directory rank 0 made, or ""
};

}  // namespace train
}  // namespace tessera
