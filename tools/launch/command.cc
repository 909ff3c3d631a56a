#include "tools/launch/command.h"

#include <algorithm>
#include <cstdlib>

#include "dist/checkpoint.h"
#include "tensor/check.h"

namespace tessera {
namespace launch {

namespace {

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

int parse_ranks(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  TS_CHECK(!value.empty() && *end == '\0' && n >= 1 && n <= 1000000, "launch: ", flag, " ",
           value, ": expected a rank count >= 1");
  return static_cast<int>(n);
}


}  // namespace

LaunchCommand::LaunchCommand(std::vector<std::string> argv) : argv_(std::move(argv)) {
  TS_CHECK(!argv_.empty(), "launch: no command after --");
  const std::string tool = basename_of(argv_[0]);
  mpirun_ = tool == "mpirun" || tool == "mpiexec" || tool == "orterun";
  TS_CHECK(mpirun_ || tool == "srun", "launch: the command starts with '", argv_[0],
           "'; expected mpirun (or mpiexec, orterun) or srun, which start the ranks");
  const std::vector<std::string> rank_flags =
      mpirun_ ? std::vector<std::string>{"-np", "-n", "--np", "--n"}
              : std::vector<std::string>{"-n", "--ntasks"};
  for (size_t i = 1; i < argv_.size(); ++i) {
    const std::string& a = argv_[i];
    for (const std::string& f : rank_flags) {
      if (ranks_ == 0 && a == f && i + 1 < argv_.size()) {
        ranks_ = parse_ranks(f, argv_[i + 1]);
        ranks_at_ = i + 1;
        ranks_flag_ = f;
      } else if (ranks_ == 0 && starts_with(a, f + "=")) {
        ranks_ = parse_ranks(f, a.substr(f.size() + 1));
        ranks_at_ = i;
        ranks_joined_ = true;
        ranks_flag_ = f;
      }
    }
    if (mpirun_ && (a == "--hostfile" || a == "-hostfile" || a == "--machinefile" ||
                    a == "-machinefile") && i + 1 < argv_.size()) {
      hostfile_ = argv_[i + 1];
    }
    if (starts_with(a, "--checkpoint-dir=")) checkpoint_dir_ = a.substr(17);
    // What a restart on fewer ranks must keep whole (the train tool checks the values).
    if (starts_with(a, "--stages=")) stages_ = std::max(1, std::atoi(a.c_str() + 9));
    if (starts_with(a, "--tensor-parallel=")) tensor_parallel_ = std::max(1, std::atoi(a.c_str() + 18));
    if (starts_with(a, "--servers=")) servers_ = std::max(0, std::atoi(a.c_str() + 10));
    if (a == "--strategy=async" && servers_ == 0) servers_ = 1;
    TS_CHECK(!starts_with(a, "--resume="), "launch: the command has ", a,
             "; the launcher adds --resume=<checkpoint dir> itself when it restarts");
  }
  TS_CHECK(ranks_ > 0, "launch: the command gives no rank count (",
           mpirun_ ? "-np N or -n N" : "-n N or --ntasks N", " after ", tool, ")");
  TS_CHECK(!checkpoint_dir_.empty(), "launch: the command has no --checkpoint-dir=DIR: a restart "
           "resumes from the last checkpoint there");
}

int LaunchCommand::fitting_ranks(int available) const {
  const int unit = stages_ * tensor_parallel_;
  for (int m = std::min(available, ranks_); m >= 1; --m) {
    if (m % unit == 0 && m > servers_) return m;
  }
  return 0;
}

std::string LaunchCommand::fitting_rule() const {
  std::string rule;
  if (stages_ > 1) rule += "--stages=" + std::to_string(stages_);
  if (tensor_parallel_ > 1) {
    rule += (rule.empty() ? "" : " x ") + std::string("--tensor-parallel=") +
            std::to_string(tensor_parallel_);
  }
  rule = rule.empty() ? "" : "a multiple of " + rule;
  if (servers_ > 0) {
    rule += (rule.empty() ? "" : " and ") + std::string("more than --servers=") +
            std::to_string(servers_);
  }
  return rule;
}

std::vector<std::string> LaunchCommand::for_attempt(int ranks, bool resume) const {
  TS_CHECK(ranks >= 1, "launch: an attempt on ", ranks, " ranks");
  std::vector<std::string> out = argv_;
  out[ranks_at_] = ranks_joined_ ? ranks_flag_ + "=" + std::to_string(ranks) : std::to_string(ranks);
  if (resume) out.push_back("--resume=" + checkpoint_dir_);
  if (mpirun_) out.insert(out.begin() + 1, {"-x", "TESSERA_RESTART_COUNT"});
  return out;
}

bool has_checkpoint(const std::string& dir) { return !committed_checkpoints(dir).empty(); }

}  // namespace launch
}  // namespace tessera
