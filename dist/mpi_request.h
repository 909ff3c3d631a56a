// MPI requests waited for on the caller's thread.
//
// wait_all() polls requests without taking a core from computation (see below). RequestWork
// is the Work of a point-to-point transfer that was posted on the caller's thread (MPI_Isend,
// MPI_Irecv under MPI_THREAD_MULTIPLE) instead of being queued to the communication thread:
// whoever waits on it completes it. A pipeline stage receives, computes and sends on one core;
// with its transfers queued, every message waited for the scheduler to run the communication
// thread and for that thread's 100 us poll, twice per message (header, payload): measured
// 0.3 ms per received activation and 4 ms before a send left, on the critical path.
//
// Under network emulation a send is held back for its flight time and posted later by the
// group's DelayLine (network_emulation.h): its RequestWork starts from a PendingRequest, which
// the line fills in when it posts.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/work.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {

// Waits for MPI requests; returns MPI's result code (the statuses say which request failed).
// A peer that is late (still in its backward pass) would otherwise have this thread spin
// inside a blocking MPI call, and with more threads than cores that spinning slows this rank's
// own compute thread. Between polls the thread yields the core to any runnable thread
// (returning at once when there is none, so latency stays low); after a long wait it sleeps.
int wait_all(std::vector<MPI_Request>& requests, std::vector<MPI_Status>& statuses);

// A request someone else posts later: set() once by the poster, taken by the RequestWork.
class PendingRequest {
 public:
  void set(MPI_Request request, int rc);  // rc: what MPI_Isend returned
  // Blocks until set() (block) or returns false at once if not yet; then fills the outputs.
  bool take(bool block, MPI_Request* request, int* rc);

 private:
  std::mutex mutex_;
  std::condition_variable posted_cv_;
  bool posted_ = false;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int rc_ = MPI_SUCCESS;
};

class RequestWork : public Work {
 public:
  // `buffers` stay alive until the request completes; `on_complete` runs once, on the thread
  // that sees it complete (a receive copies its host buffer to the device there).
  // `what` and `peer` (a world rank) name the transfer in a timeout's message.
  RequestWork(MPI_Request request, std::vector<Tensor> buffers,
              std::function<void()> on_complete = nullptr, std::string what = "a transfer",
              int peer = -1);
  // A transfer not posted yet: waiting on it first waits for `pending` to be set.
  RequestWork(std::shared_ptr<PendingRequest> pending, std::vector<Tensor> buffers,
              std::string what = "a transfer", int peer = -1);
  ~RequestWork() override;  // an unwaited transfer is waited for here: its buffers must live
  void wait() override;
  bool is_completed() override;

 private:
  void finish(int rc);  // with the mutex held
  // With the mutex held: takes over the pending request once posted (waiting for it if `block`);
  // false while it is not. A failed post finishes the work with its error.
  bool posted(bool block);

  std::mutex mutex_;
  std::shared_ptr<PendingRequest> pending_;  // null once posted (or for a transfer posted at once)
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::vector<Tensor> buffers_;
  std::function<void()> on_complete_;
  bool done_ = false;
  int rc_ = MPI_SUCCESS;
  const char* failed_call_ = "MPI_Wait (point-to-point)";  // for rc_'s message
  std::string what_;
  int peer_ = -1;
};

}  // namespace dist
}  // namespace tessera
