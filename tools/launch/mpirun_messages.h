// Open MPI's own messages about a job's end, taken out of its stderr, with what they say about
// the rank that ended the job kept as one line of the launcher's.
//
// When a rank fails, mpirun (and Open MPI 5's prterun) adds its own messages to the ranks'
// output: help blocks between two lines of dashes, and lines of its daemons:
//
//   [rank 1] error: ...                                        the rank's own: shown
//   --------------------------------------------------------------------------
//   MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD    a help block: dropped,
//   with errorcode 1.                                                 "rank 1 called MPI_Abort
//   ...                                                               (error code 1)" kept
//   --------------------------------------------------------------------------
//   [vm:21625] 1 more process has sent help message help-mpi-api.txt / mpi-abort   dropped
//   [vm:32580] [[5050,0],0] ORTE_ERROR_LOG: Data unpack would read past end ...    dropped
//
// The blocks that name the failed rank:
//   mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).
//   The first process to do so was: / Process name: [[14496,1],0] / Exit code: 2
//   MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD / with errorcode 1.
//   prterun|mpirun has exited due to process rank 0 with PID 0 on node vm exiting improperly
//
// srun's line for a failed task ("srun: error: node1: task 1: Killed") is kept, and names the
// rank too. A block is held until its closing line of dashes, then dropped if it is one of those above
// (or "Primary job terminated normally, but 1 process returned a non-zero exit code"), and
// shown as it was otherwise: mpirun's other messages (not enough slots, a transport's warning)
// are the user's to read, and so is a block that never closes. The ranks' own lines ("[rank N] ...",
// "train: ...") are shown even when they arrive inside a block (mpirun interleaves the
// processes' output line by line).
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace launch {

class MpirunMessages {
 public:
  // One line of the job's stderr (without its newline); returns the lines to show now.
  std::vector<std::string> take(const std::string& line);
  // At the end of the output: the lines still held (a block that never closed).
  std::vector<std::string> finish();

  // What mpirun said of the rank that ended the job: "rank 2 was killed by SIGKILL (signal 9):
  // ...", "rank 0 ended with exit code 2", "rank 1 called MPI_Abort (error code 1)"; when it
  // said nothing (MPI_Abort ends the job before mpirun's message, at times), the first rank
  // that printed "[rank N] error: ...": "rank N failed: its error is above"; else "".
  const std::string& failed_rank() const;
  // How many of mpirun's lines were taken out.
  int lines_dropped() const { return dropped_; }

 private:
  // Reads the closed block: whether it is one of mpirun's about how the job ended (then
  // failed_rank_ takes the rank it names, if the first).
  bool read_block();

  bool in_block_ = false;
  std::vector<std::string> block_;  // the open block's lines, its opening dashes first
  std::string failed_rank_;  // mpirun's word
  std::string rank_error_;   // the first "[rank N] error: " line's
  int dropped_ = 0;
};

}  // namespace launch
}  // namespace tessera
