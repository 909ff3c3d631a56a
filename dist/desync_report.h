// The desync report (PyTorch c10d's TORCH_DISTRIBUTED_DEBUG desync report, by messages): when a
// rank's wait times out (collective_timeout.h), what was every other rank doing?
//
//   rank 0 times out in all_reduce #57 waiting for rank 1
//     -> asks every rank, on a communicator of its own (a duplicate of the world's)
//   rank 2, itself waiting in all_reduce #57 for rank 1, answers from its wait loop:
//        "waiting 5.1 s in all_reduce #57 (...) for rank 1"
//   rank 3, at another collective, answers "waiting 4.9 s in broadcast #3 (...)"
//   rank 1, stalled in its own code, answers from its answering thread, with its last
//        collective: "not waiting for any rank (computing, or between collectives); its last
//        wait, all_reduce #56 (...), ended 5.3 s ago" (it has not arrived at #57)
//   rank 4, whose program has ended, answers from dist::finalize's wait:
//        "waiting 5.0 s in dist::finalize (this rank's program has ended)"
//   rank 5, dead, does not answer within the window
//
// and the timeout's message ends with
//
//   desync report (each rank's answer within 2 s):
//     rank 0: waiting 5.0 s in all_reduce #57 (...) for rank 1 (this rank)
//     rank 1: not waiting for any rank (computing, or between collectives); its last wait,
//             all_reduce #56 (...), ended 5.3 s ago
//     rank 2: waiting 5.1 s in all_reduce #57 (...) for rank 1
//     ...
//     rank 5: no answer: dead, frozen whole, or past dist::finalize
//
// which says at once that rank 1 is the one to look at, and whether the others agree on the
// collective (a rank at another collective or another number is the desync). Ranks answer
// from their wait loops (mpi_request.h) and, when in none, from a thread that looks for
// queries every 20 ms while the channel is open (from dist::init to dist::finalize, on more
// than one rank); only a rank that is dead, or whose process is frozen whole, stays silent.
#pragma once

#include <string>

namespace tessera {
namespace dist {

// Collective over MPI_COMM_WORLD (dist::init calls it): the query channel, and the thread that
// answers queries while no wait loop does. stop (finalize) ends the thread and frees the
// channel. Without a channel the functions below do nothing.
void start_desync_channel();
void stop_desync_channel();

// Answers the queries that have arrived (describe_waits()); cheap when none has. Called from
// wait loops, on any thread (one answers at a time).
void answer_desync_queries();

// Asks every other rank and collects the answers for up to `answer_seconds`; returns the
// report's text (lines as above, starting with a newline), or "" without a channel or with one
// rank.
std::string desync_report(double answer_seconds = 2.0);

}  // namespace dist
}  // namespace tessera
