// Open MPI's own messages in a job's stderr, taken out of what the user reads, with what they
// say about the rank that ended the job kept as one line of the launcher's.
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
// A block is held until its closing line of dashes: one that never closes (the output ended,
// or it was not mpirun's after all) is shown as it was. The ranks' own lines ("[rank N] ...",
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
  void read_block();

  bool in_block_ = false;
  std::vector<std::string> block_;  // the open block's lines, its opening dashes first
  std::string failed_rank_;  // mpirun's word
  std::string rank_error_;   // the first "[rank N] error: " line's
  int dropped_ = 0;
};

}  // namespace launch
}  // namespace tessera
