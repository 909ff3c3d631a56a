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
// NCCL watchdog does. What each other rank was doing at that moment (c10d's desync report) is
// not gathered: the message names the rank this one waited for.
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
// unknown): the timeout's message says so. Scopes nest (the innermost wins).
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

}  // namespace dist
}  // namespace tessera
