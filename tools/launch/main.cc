// launch: elastic restarts for the train tool (torchrun's --max-restarts, for mpirun and srun).
//
//   bazel-bin/tools/launch --max-restarts=2 [--min-ranks=M] [--before-restart=CMD]
//       -- mpirun -np 4 --hostfile hosts bazel-bin/tools/train --model=resnet20 --checkpoint-dir=ck
//
// Runs the command; when it fails (a rank died, or a collective timed out and ended the job),
// runs it again from the last committed checkpoint in --checkpoint-dir (the train tool's
// --resume=DIR, full or sharded, which passes over a newest checkpoint that fails its hashes for
// the one before; the train tool checkpoints after every epoch, so the epoch that was interrupted
// runs again from its start, with the same data order), up to --max-restarts times. Each
// attempt runs on as many ranks as the command's hostfile offers then, at most the original N;
// fewer than --min-ranks (default N) ends the job. Exit code 2 (the train tool's "bad flags")
// is not retried: the same command would fail the same way. Every attempt is logged on stderr
// with its command; the train tool's final JSON carries "restarts" (TESSERA_RESTART_COUNT).
//
// Before the first attempt the launcher reads the train tool's flags (the --name=value
// arguments ending the command) as the train tool does and checks them with the support table
// (tools/train/support_table.h: a restart needs --checkpoint-dir), and before an attempt on
// fewer ranks checks that restart too; a refusal ends it with exit code 2 before any rank
// starts.
//
// What the user reads: the ranks' output as it comes, without Open MPI's messages about how the
// job ended (its help blocks, its daemons' ORTE_ERROR_LOG lines: mpirun_messages.h), and for each
// failed attempt one line saying how it ended and which rank ended it, in words (exit_status.h):
//
//   launch: attempt 1 ended after 2.1 s: rank 1 was killed by SIGKILL (signal 9): out of memory
//   (the kernel's OOM killer), a scheduler, or kill -9 (the job's exit code 137)
//   launch: attempt 1 ended after 0.4 s: rank 0 failed: its error is above (the job's exit code 1)
//
// and, when mpirun named no rank, its exit code in words ("exit code 139 = 128 + 11, killed by
// SIGSEGV (signal 11): a crash in native code ...").
//
// --before-restart=CMD runs CMD with /bin/sh before each restart (a node health check that
// rewrites the hostfile, say); the restart is abandoned if it fails.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/check.h"
#include "tools/launch/command.h"
#include "tools/launch/exit_status.h"
#include "tools/launch/hostfile.h"
#include "tools/launch/mpirun_messages.h"

namespace {

using tessera::launch::LaunchCommand;

int usage() {
  std::fprintf(stderr,
               "usage: launch [--max-restarts=R (3)] [--min-ranks=M (the command's)] "
               "[--before-restart=CMD] -- mpirun|srun ... train ... --checkpoint-dir=DIR\n");
  return 2;
}

volatile sig_atomic_t child_pid = 0;

// Ctrl-C or a scheduler's SIGTERM reach the job (mpirun passes them on to the ranks).
void forward(int signal) {
  if (child_pid > 0) ::kill(child_pid, signal);
}

struct Outcome {
  int exit_code = 0;  // 128 + signal when killed
  std::string how;    // the end in words: "exit code 1", "killed by SIGKILL (signal 9): ..."
  double seconds = 0;
};

// Shows the job's stderr line by line as it comes, without Open MPI's own messages
// (mpirun_messages.h); returns what they said of the rank that ended the job.
std::string show_without_mpirun_messages(int fd) {
  tessera::launch::MpirunMessages messages;
  FILE* in = ::fdopen(fd, "r");
  TS_CHECK(in != nullptr, "launch: fdopen failed: ", std::strerror(errno));
  std::string line;
  for (;;) {
    const int c = std::fgetc(in);
    if (c == EOF) {
      if (std::ferror(in) && errno == EINTR) {  // a signal passed on to the job (forward)
        std::clearerr(in);
        continue;
      }
      break;
    }
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    for (const std::string& shown : messages.take(line)) std::fprintf(stderr, "%s\n", shown.c_str());
    std::fflush(stderr);
    line.clear();
  }
  if (!line.empty()) {
    for (const std::string& shown : messages.take(line)) std::fprintf(stderr, "%s\n", shown.c_str());
  }
  for (const std::string& held : messages.finish()) std::fprintf(stderr, "%s\n", held.c_str());
  std::fclose(in);
  return messages.failed_rank();
}

// Runs argv to its end. With `filter`, its stderr passes through show_without_mpirun_messages
// and Outcome::how names the rank mpirun said ended the job.
Outcome run(const std::vector<std::string>& argv, bool filter = false) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};
  if (filter) TS_CHECK(::pipe(pipe_fds) == 0, "launch: pipe failed: ", std::strerror(errno));
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  TS_CHECK(pid >= 0, "launch: fork failed: ", std::strerror(errno));
  if (pid == 0) {
    if (filter) {
      ::dup2(pipe_fds[1], STDERR_FILENO);
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
    }
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "launch: cannot run '%s': %s\n", args[0], std::strerror(errno));
    std::_Exit(127);
  }
  child_pid = pid;
  std::string failed_rank;
  if (filter) {
    ::close(pipe_fds[1]);
    failed_rank = show_without_mpirun_messages(pipe_fds[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_pid = 0;
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // The rank mpirun named says more than mpirun's own code (137 when any rank was killed).
  o.how = failed_rank.empty() || !WIFEXITED(status)
              ? tessera::launch::describe_wait_status(status)
              : failed_rank + " (the job's exit code " + std::to_string(o.exit_code) + ")";
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

bool int_flag(const std::string& arg, const std::string& name, int* out) {
  if (arg.compare(0, name.size() + 1, name + "=") != 0) return false;
  const std::string v = arg.substr(name.size() + 1);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  TS_CHECK(!v.empty() && *end == '\0' && n >= 0, "launch: ", name, "=", v,
           ": expected a count >= 0");
  *out = static_cast<int>(n);
  return true;
}

int launch(int argc, char** argv) {
  int max_restarts = 3, min_ranks = -1;
  std::string before_restart;
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    }
    if (int_flag(a, "--max-restarts", &max_restarts) || int_flag(a, "--min-ranks", &min_ranks)) {
      continue;
    }
    if (a.compare(0, 17, "--before-restart=") == 0) {
      before_restart = a.substr(17);
      continue;
    }
    std::fprintf(stderr, "launch: unknown argument '%s'\n", a.c_str());
    return usage();
  }
  if (i + 1 >= argc) return usage();
  const LaunchCommand command(std::vector<std::string>(argv + i + 1, argv + argc));
  if (min_ranks < 0) min_ranks = command.ranks();
  TS_CHECK(min_ranks >= 1 && min_ranks <= command.ranks(), "launch: --min-ranks=", min_ranks,
           " must be between 1 and the command's ", command.ranks(), " ranks");
  ::signal(SIGINT, forward);
  ::signal(SIGTERM, forward);
  for (int attempt = 0;; ++attempt) {
    int ranks = command.ranks();
    if (command.hostfile()) {
      const int slots = tessera::launch::hostfile_slots(*command.hostfile());
      // As many as the slots allow and the run's layout fits (whole pipelines of whole
      // tensor-parallel groups, a worker beside the servers).
      ranks = command.fitting_ranks(slots);
      if (ranks < min_ranks) {
        const std::string rule = command.fitting_rule();
        std::fprintf(stderr, "launch: the hostfile %s offers %d slot%s%s%s, fewer than "
                     "--min-ranks=%d: giving up after %d restart%s\n", command.hostfile()->c_str(),
                     slots, slots == 1 ? "" : "s",
                     rule.empty() ? "" : ", and the ranks must be ", rule.c_str(), min_ranks,
                     attempt, attempt == 1 ? "" : "s");
        return 1;
      }
    }
    // The support table's word on this restart (what cannot, or what starts fresh, on fewer).
    if (ranks < command.ranks()) command.check_restart("fewer-ranks");
    const bool resume = tessera::launch::has_checkpoint(command.checkpoint_dir());
    const std::vector<std::string> args = command.for_attempt(ranks, resume);
    ::setenv("TESSERA_RESTART_COUNT", std::to_string(attempt).c_str(), 1);
    std::fprintf(stderr, "launch: attempt %d on %d rank%s%s: %s\n", attempt + 1, ranks,
                 ranks == 1 ? "" : "s",
                 resume ? (", resuming from " + command.checkpoint_dir()).c_str() : "",
                 joined(args).c_str());
    std::fflush(stderr);
    const Outcome o = run(args, /*filter=*/true);
    if (o.exit_code == 0) {
      std::fprintf(stderr, "launch: finished after %d restart%s\n", attempt,
                   attempt == 1 ? "" : "s");
      return 0;
    }
    std::fprintf(stderr, "launch: attempt %d ended after %.1f s: %s\n", attempt + 1, o.seconds,
                 o.how.c_str());
    if (o.exit_code == 2) {
      std::fprintf(stderr, "launch: exit code 2 is a usage error; not restarting\n");
      return 2;
    }
    if (attempt >= max_restarts) {
      std::fprintf(stderr, "launch: no restarts left (--max-restarts=%d)\n", max_restarts);
      return o.exit_code;
    }
    if (!before_restart.empty()) {
      const Outcome check = run({"/bin/sh", "-c", before_restart});
      if (check.exit_code != 0) {
        std::fprintf(stderr, "launch: --before-restart '%s' failed with %s: not restarting\n",
                     before_restart.c_str(), check.how.c_str());
        return o.exit_code;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return launch(argc, argv);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "%s\n", e.message().c_str());
    return 2;
  }
}
