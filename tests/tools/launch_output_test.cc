// What tools/launch tells of a job's end: exit codes and signals in words (exit_status.h), and
// Open MPI's messages taken out of the job's stderr (mpirun_messages.h), on output captured
// from mpirun 4.1 on this machine, line by line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tools/launch/exit_status.h"
#include "tools/launch/mpirun_messages.h"

namespace tessera {
namespace launch {
namespace {

using Lines = std::vector<std::string>;

const std::string kDashes(74, '-');

// The lines shown, feeding `lines` one by one and finishing.
Lines shown(MpirunMessages& m, const Lines& lines) {
  Lines out;
  for (const std::string& line : lines) {
    for (const std::string& s : m.take(line)) out.push_back(s);
  }
  for (const std::string& s : m.finish()) out.push_back(s);
  return out;
}

// A real child's wait status: it exits with `code`, or kills itself with `signal`.
int wait_status_of_child(int code, int signal) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (signal != 0) ::kill(::getpid(), signal);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ExitStatus, ExitCodesAbove128AreTheSignalsTheyStandFor) {
  EXPECT_EQ(signal_text(9), "SIGKILL (signal 9)");
  EXPECT_EQ(signal_text(11), "SIGSEGV (signal 11)");
  EXPECT_EQ(describe_exit_code(0), "exit code 0");
  EXPECT_EQ(describe_exit_code(1), "exit code 1");
  EXPECT_EQ(describe_exit_code(128), "exit code 128");
  EXPECT_EQ(describe_exit_code(137),
            "exit code 137 = 128 + 9, killed by SIGKILL (signal 9): out of memory (the kernel's "
            "OOM killer), a scheduler, or kill -9");
  EXPECT_EQ(describe_exit_code(139),
            "exit code 139 = 128 + 11, killed by SIGSEGV (signal 11): a crash in native code (an "
            "invalid memory access)");
  EXPECT_EQ(describe_exit_code(134),
            "exit code 134 = 128 + 6, killed by SIGABRT (signal 6): abort(): a failed assertion "
            "or an uncaught exception");
  EXPECT_EQ(describe_exit_code(255), "exit code 255");
}

TEST(ExitStatus, AChildKilledByASignalIsSaidSo) {
  EXPECT_EQ(describe_wait_status(wait_status_of_child(3, 0)), "exit code 3");
  EXPECT_EQ(describe_wait_status(wait_status_of_child(0, SIGKILL)), killed_by(SIGKILL));
  EXPECT_EQ(describe_wait_status(wait_status_of_child(0, SIGTERM)),
            "killed by SIGTERM (signal 15): asked to stop (a scheduler's time limit, or a signal "
            "passed on)");
  // A signal without a likely cause: its name alone.
  EXPECT_EQ(describe_wait_status(wait_status_of_child(0, SIGUSR1)), "killed by SIGUSR1 (signal 10)");
}

TEST(MpirunMessages, ARankKilledBySignalIsNamedAndTheBlocksDropped) {
  MpirunMessages m;
  EXPECT_EQ(shown(m, {"[rank 1] --inject-fault: crashing at step 2", kDashes,
                      "Primary job  terminated normally, but 1 process returned",
                      "a non-zero exit code. Per user-direction, the job has been aborted.",
                      kDashes, kDashes,
                      "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 "
                      "(Killed).",
                      kDashes}),
            Lines{"[rank 1] --inject-fault: crashing at step 2"});
  EXPECT_EQ(m.failed_rank(), "rank 1 was " + killed_by(9));
  EXPECT_EQ(m.lines_dropped(), 7);
}

TEST(MpirunMessages, TheFirstProcessToExitNonZeroIsNamedWithItsCode) {
  MpirunMessages m;
  EXPECT_EQ(shown(m, {"train: unknown flag --stratgy; did you mean --strategy?",
                      "(run with --help for the flags)", kDashes,
                      "mpirun detected that one or more processes exited with non-zero status, "
                      "thus causing",
                      "the job to be terminated. The first process to do so was:", "",
                      "  Process name: [[14496,1],3]", "  Exit code:    2", kDashes}),
            (Lines{"train: unknown flag --stratgy; did you mean --strategy?",
                   "(run with --help for the flags)"}));
  EXPECT_EQ(m.failed_rank(), "rank 3 ended with exit code 2");
}

TEST(MpirunMessages, MpiAbortAndTheDaemonsLinesAreTakenOut) {
  MpirunMessages m;
  EXPECT_EQ(shown(m, {"[rank 0] error: data/mnist.cc:18: MNIST: neither ... exists", kDashes,
                      "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD",
                      "with errorcode 1.", "",
                      "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
                      kDashes,
                      "[vm:21625] 1 more process has sent help message help-mpi-api.txt / mpi-abort",
                      "[vm:21625] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all "
                      "help / error messages",
                      "[vm:32580] [[5050,0],0] ORTE_ERROR_LOG: Data unpack would read past end of "
                      "buffer in file ../../../orte/util/show_help.c at line 501"}),
            Lines{"[rank 0] error: data/mnist.cc:18: MNIST: neither ... exists"});
  EXPECT_EQ(m.failed_rank(), "rank 0 called MPI_Abort (error code 1)");
}

TEST(MpirunMessages, WithoutMpirunsWordTheFirstRanksErrorIsNamed) {
  // MPI_Abort can end the job before mpirun prints its block.
  MpirunMessages m;
  shown(m, {"[rank 2] error: collective timeout: ...", "[rank 1] error: later"});
  EXPECT_EQ(m.failed_rank(), "rank 2 failed: its error is above");
  MpirunMessages srun;  // Slurm's line is kept, and names the rank
  EXPECT_EQ(shown(srun, {"srun: error: node3: task 5: Killed"}),
            Lines{"srun: error: node3: task 5: Killed"});
  EXPECT_EQ(srun.failed_rank(), "rank 5: Killed (srun)");
  MpirunMessages prterun;  // Open MPI 5
  shown(prterun, {kDashes, "prterun has exited due to process rank 1 with PID 0 on node vm "
                           "exiting improperly. There are three reasons this could occur:",
                  kDashes});
  EXPECT_EQ(prterun.failed_rank(), "rank 1 exited without finalizing MPI");
}

TEST(MpirunMessages, TheRanksLinesInsideABlockAndAnUnclosedBlockAreShown) {
  MpirunMessages m;
  // mpirun interleaves the processes' output line by line: a rank's line inside a block.
  EXPECT_EQ(shown(m, {kDashes, "Primary job  terminated normally, but 1 process returned",
                      "[rank 1] error: the same, later", kDashes}),
            Lines{"[rank 1] error: the same, later"});
  // mpirun's other messages are shown: not enough slots, say.
  MpirunMessages slots;
  const Lines refused = {kDashes, "There are not enough slots available in the system to satisfy "
                                  "the 4", "slots that were requested by the application:", kDashes};
  EXPECT_EQ(shown(slots, refused), refused);
  EXPECT_EQ(slots.failed_rank(), "");
  EXPECT_EQ(slots.lines_dropped(), 0);
  // A block that never closes was not mpirun's (or the output was cut): shown as it was.
  MpirunMessages open;
  EXPECT_EQ(shown(open, {"a table:", kDashes, "a row", "the end"}),
            (Lines{"a table:", kDashes, "a row", "the end"}));
  EXPECT_EQ(open.failed_rank(), "");
  // Lines that merely look alike are the user's.
  MpirunMessages plain;
  EXPECT_EQ(shown(plain, {"[host] ORTE_ERROR_LOG in a sentence", "-----"}),
            (Lines{"[host] ORTE_ERROR_LOG in a sentence", "-----"}));
}

}  // namespace
}  // namespace launch
}  // namespace tessera
