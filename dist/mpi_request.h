// MPI requests waited for on the caller's thread.
//
// wait_all() polls requests without taking a core from computation (see below). RequestWork
// is the Work of a point-to-point transfer that was posted on the caller's thread (MPI_Isend,
// MPI_Irecv under MPI_THREAD_MULTIPLE) instead of being queued to the communication thread:
// whoever waits on it completes it. A pipeline stage receives, computes and sends on one core;
// with its transfers queued, every message waited for the scheduler to run the communication
// thread and for that thread's 100 us poll, twice per message (header, payload): measured
// 0.3 ms per received activation and 4 ms before a send left, on the critical path.
#pragma once

#include <mpi.h>

#include <functional>
#include <mutex>
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

class RequestWork : public Work {
 public:
  // `buffers` stay alive until the request completes; `on_complete` runs once, on the thread
  // that sees it complete (a receive copies its host buffer to the device there).
  RequestWork(MPI_Request request, std::vector<Tensor> buffers,
              std::function<void()> on_complete = nullptr);
  ~RequestWork() override;  // an unwaited transfer is waited for here: its buffers must live
  void wait() override;
  bool is_completed() override;

 private:
  void finish(int rc);  // with the mutex held

  std::mutex mutex_;
  MPI_Request request_;
  std::vector<Tensor> buffers_;
  std::function<void()> on_complete_;
  bool done_ = false;
  int rc_ = MPI_SUCCESS;
};

}  // namespace dist
}  // namespace tessera
