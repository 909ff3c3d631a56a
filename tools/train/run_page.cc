#include "tools/train/run_page.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "tensor/check.h"
#include "tools/explain/html_report.h"
#include "tools/explain/run_directory.h"

namespace tessera {
namespace train {

namespace {

// This process's command line as a shell would take it back (/proc/self/cmdline: the arguments
// separated by NUL bytes); arguments with spaces or quotes single-quoted.
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out, arg;
  std::istringstream args(all);
  while (std::getline(args, arg, '\0')) {
    if (!out.empty()) out += ' ';
    if (arg.find_first_of(" \t'\"$\\") == std::string::npos && !arg.empty()) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    out += '\'';
  }
  return out;
}

}  // namespace

RunPage::RunPage(const Config& given, bool lead) : config_(given), given_trace_(given.trace) {
  if (given.report.empty() || (!given.metrics.empty() && !given.trace.empty())) return;
  std::string dir = "(rank 0's)";  // only rank 0 writes the metrics and the trace
  if (lead) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tessera_report.XXXXXX";
    TS_CHECK(::mkdtemp(pattern.data()) != nullptr, "--report=", given.report,
             ": cannot make a temporary directory for the run's metrics and trace (", pattern, ")");
    dir = temporary_ = pattern;
  }
  if (config_.metrics.empty()) config_.metrics = dir + "/metrics.jsonl";
  if (config_.trace.empty()) config_.trace = dir + "/trace.json";
}

RunPage::~RunPage() {
  if (temporary_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(temporary_, ignored);
}

void RunPage::write(const std::string& summary) const {
  if (config_.report.empty() || summary.empty()) return;
  explain::RunDirectory run;
  run.path = config_.report;
  run.metrics = {config_.metrics};
  run.traces = {config_.trace};
  run.summary = explain::parse_run_summary(summary, "the run's final JSON line");
  run.command = own_command_line();
  const std::string page = explain::run_report_html(run);
  std::ofstream out(config_.report);
  out << page;
  out.close();
  TS_CHECK(out.good(), "--report=", config_.report, ": writing the page failed");
  std::printf("report: %s (%zu bytes; curves, every rank's last step, memory, bytes per "
              "collective, flags)\n",
              config_.report.c_str(), page.size());
  std::fflush(stdout);
}

}  // namespace train
}  // namespace tessera
