// Collective timeouts: no rank waits forever for a peer that stopped answering.
//
// With a timeout set, every wait for a message (a ring step of a collective on the group's
// communication thread, a point-to-point transfer on the caller's thread) that lasts longer
// raises CollectiveTimeout naming what waited, for how long and for which rank:
//
//   collective timeout: all_reduce #57 (4096 elements of f32 on rank 0 of a group of 2) has
//   waited 5.0 s for a message from rank 1 (timeout 5 s): rank 1 never joined it, is stuck
//   before it, or is at another collective
//
// Under run_or_abort (environment.h) the error ends the whole job on every rank, as PyTorch's
// NCCL watchdog does. Before that, the timed-out rank asks every other rank what it is doing
// (desync_report.h, c10d's desync report) and the message ends with their answers.
//
//   dist::set_collective_timeout(600);   // the train tool's --collective-timeout (default 600)
#pragma once

#include <stdexcept>
#include <string>

namespace tessera {
namespace dist {

struct CollectiveTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Seconds; 0 (the default) waits forever. Throws on a negative or non-finite value.
void set_collective_timeout(double seconds);
double collective_timeout();

// While one lives, waits on this thread are for `what` and rank `peer` (world rank; -1 when
// unknown): the timeout's message says so, and so does this rank's answer to a desync query
// (describe_waits). Scopes nest (the innermost wins).
class WaitingFor {
 public:
  WaitingFor(const std::string& what, int peer);
  ~WaitingFor();
  WaitingFor(const WaitingFor&) = delete;
  WaitingFor& operator=(const WaitingFor&) = delete;

 private:
  const std::string* previous_what_;
  int previous_peer_;
};

// For wait loops: throws CollectiveTimeout once `waited_seconds` exceeds the timeout.
void check_collective_timeout(double waited_seconds);

// What this process's threads are waiting for now, one clause per waiting thread, e.g.
//   "waiting 5.1 s in all_reduce #57 (...) for rank 1"
// or, when no thread waits, "timed out in all_reduce #57 (...) for rank 1 after 5.0 s (its own
// error ends the job)" once a wait of this process has timed out, else "not waiting for any
// rank (computing, or between collectives); its last wait, all_reduce #56 (...), ended 0.3 s
// ago" (or "no wait yet").
std::string describe_waits();

}  // namespace dist
}  // namespace tessera
