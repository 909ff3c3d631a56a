#include "tools/launch/command.h"

#include <algorithm>
#include <cstdlib>

#include "dist/checkpoint.h"
#include "tensor/check.h"
#include "tools/train/support_table.h"

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
  // The train tool's flags: the arguments after its program, the command's last argument that
  // is not a --flag (every flag of the train tool is --name=value).
  size_t program = argv_.size();
  while (program > 1 && starts_with(argv_[program - 1], "--")) --program;
  --program;
  for (size_t i = 1; i < program; ++i) {
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
  }
  TS_CHECK(ranks_ > 0, "launch: the command gives no rank count (",
           mpirun_ ? "-np N or -n N" : "-n N or --ntasks N", " after ", tool, ")");
  const std::vector<std::string> flags(argv_.begin() + program + 1, argv_.end());
  for (const std::string& a : flags) {
    TS_CHECK(!starts_with(a, "--resume="), "launch: the command has ", a,
             "; the launcher adds --resume=<checkpoint dir> itself when it restarts");
  }
  // The train tool's own check, before any rank starts: the flags, and a restart with them
  // (the support table's "restart" axis: a --checkpoint-dir to restart from).
  try {
    train_ = train::read_flags(flags);
  } catch (const train::FlagError& e) {
    TS_FAIL("launch: the train tool's flags: ", e.what());
  }
  check_restart("same-ranks");
  // What a restart on fewer ranks must keep whole.
  if (train_.strategy == "pipeline" && train_.stages > 0) stages_ = train_.stages;
  tensor_parallel_ = std::max(1, train_.tensor_parallel);
  context_parallel_ = std::max(1, train_.context_parallel);
  if (train_.strategy == "async") servers_ = train_.servers;
}

void LaunchCommand::check_restart(const std::string& restart) const {
  train::Config c = train_;
  c.restart = restart;
  try {
    train::check_support(c);
  } catch (const train::FlagError& e) {
    TS_FAIL("launch: ", e.what());
  }
}

int LaunchCommand::fitting_ranks(int available) const {
  const int unit = stages_ * tensor_parallel_ * context_parallel_;
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
  if (context_parallel_ > 1) {
    rule += (rule.empty() ? "" : " x ") + std::string("--context-parallel=") +
            std::to_string(context_parallel_);
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
  if (resume) out.push_back("--resume=" + train_.checkpoint_dir);
  if (mpirun_) out.insert(out.begin() + 1, {"-x", "TESSERA_RESTART_COUNT"});
  return out;
}

bool has_checkpoint(const std::string& dir) { return !committed_checkpoints(dir).empty(); }

}  // namespace launch
}  // namespace tessera
