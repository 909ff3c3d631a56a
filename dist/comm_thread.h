// CommThread: runs a process group's communication, in issue order, off the caller's thread.
//
// A task either completes before returning (the ring collectives) or starts non-blocking
// point-to-point transfers and returns them in flight: their MPI requests, the buffers they
// use (kept alive until done) and a step to run on completion. The thread polls transfers
// between tasks; either way the task's Work completes when its communication has. An exception in a
// task is stored in its Work and re-raised by wait() on the caller's thread.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/work.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {

class CommThread {
 public:
  struct InFlight {
    std::vector<MPI_Request> requests;  // empty: the task already finished
    std::vector<Tensor> buffers;        // kept alive until the requests complete
    std::function<void()> on_complete;  // run on the thread once they have
  };
  using Task = std::function<InFlight()>;

  CommThread();
  ~CommThread();  // finishes everything queued, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  std::shared_ptr<Work> submit(Task task);
  // Finishes everything queued and stops the thread (idempotent).
  void shutdown();

 private:
  void loop();

  struct Item {
    Task task;
    std::shared_ptr<FutureWork> work;
  };
  struct Pending {
    InFlight transfer;
    std::shared_ptr<FutureWork> work;
  };

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::vector<Pending> pending_;  // touched by the thread only
  std::thread thread_;
};

}  // namespace dist
}  // namespace tessera
