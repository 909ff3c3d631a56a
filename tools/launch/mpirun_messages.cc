#include "tools/launch/mpirun_messages.h"

#include <regex>

#include "tools/launch/exit_status.h"

namespace tessera {
namespace launch {

namespace {

bool dashes(const std::string& line) {
  return line.size() >= 40 && line.find_first_not_of('-') == std::string::npos;
}

// A line a rank printed itself (tessera's tools and library), never mpirun's.
bool ranks_own(const std::string& line) {
  static const std::regex own(R"(^(\[rank \d+\]|train|launch|explain)[ :(])");
  return std::regex_search(line, own);
}

// A line of mpirun's daemons: "[host:pid] ..." saying ORTE_ERROR_LOG, PMIX_ERROR, or that
// more help messages were aggregated.
bool daemon_line(const std::string& line) {
  static const std::regex daemon(
      R"(^\[[^\]\s]+:\d+\] .*(ORTE_ERROR_LOG|PMIX_ERROR|PRTE_ERROR_LOG|OPAL_ERROR_LOG|help message|orte_base_help_aggregate|prte_base_help_aggregate))");
  return std::regex_search(line, daemon);
}

}  // namespace

std::vector<std::string> MpirunMessages::take(const std::string& line) {
  if (ranks_own(line)) {
    static const std::regex error(R"(^\[rank (\d+)\] error: )");
    std::smatch m;
    if (rank_error_.empty() && std::regex_search(line, m, error)) {
      rank_error_ = "rank " + m[1].str() + " failed: its error is above";
    }
    return {line};
  }
  if (in_block_) {
    block_.push_back(line);
    if (!dashes(line)) return {};
    // The block closes: one about how the job ended is read and dropped; any other (not
    // enough slots, a transport's warning) is the user's to read.
    std::vector<std::string> shown;
    if (read_block()) {
      dropped_ += static_cast<int>(block_.size());
    } else {
      shown = block_;
    }
    block_.clear();
    in_block_ = false;
    return shown;
  }
  if (dashes(line)) {
    in_block_ = true;
    block_ = {line};
    return {};
  }
  if (daemon_line(line)) {
    ++dropped_;
    return {};
  }
  // srun's one line per failed task (kept: it is short): "srun: error: node1: task 1: Killed".
  static const std::regex srun_task(R"(^srun: error: \S+: tasks? (\d+)(-\d+)?: (.+)$)");
  std::smatch m;
  if (failed_rank_.empty() && std::regex_search(line, m, srun_task)) {
    failed_rank_ = "rank " + m[1].str() + ": " + m[3].str() + " (srun)";
  }
  return {line};
}

std::vector<std::string> MpirunMessages::finish() {
  std::vector<std::string> held;
  held.swap(block_);
  in_block_ = false;
  return held;
}

const std::string& MpirunMessages::failed_rank() const {
  return failed_rank_.empty() ? rank_error_ : failed_rank_;
}

bool MpirunMessages::read_block() {
  std::string text;
  for (const std::string& line : block_) text += line + "\n";
  std::smatch m;
  static const std::regex on_signal(R"(process rank (\d+) with PID \d+ on\s+node \S+ exited on signal (\d+))");
  static const std::regex first(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (\d+))");
  static const std::regex improperly(R"(has exited due to process rank (\d+) with PID \d+ on\s+node \S+ exiting improperly)");
  static const std::regex terminated(R"(Primary job\s+terminated normally, but \d+ process(es)? returned)");
  std::string named;
  if (std::regex_search(text, m, on_signal)) {
    named = "rank " + m[1].str() + " was " + killed_by(std::stoi(m[2].str()));
  } else if (std::regex_search(text, m, first)) {
    named = "rank " + m[1].str() + " ended with " + describe_exit_code(std::stoi(m[2].str()));
  } else if (std::regex_search(text, m, aborted)) {
    named = "rank " + m[1].str() + " called MPI_Abort (error code " + m[2].str() + ")";
  } else if (std::regex_search(text, m, improperly)) {
    named = "rank " + m[1].str() + " exited without finalizing MPI";
  } else {
    return std::regex_search(text, terminated);  // names no rank; the next block does
  }
  if (failed_rank_.empty()) failed_rank_ = named;  // the first named ended the job
  return true;
}

}  // namespace launch
}  // namespace tessera
