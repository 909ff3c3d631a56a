// CommThread: runs a process group's collectives, in issue order, off the caller's thread.
//
// Each task completes its communication before returning (the ring collectives wait for their
// MPI requests); the task's Work completes when it has. An exception in a task is stored in
// its Work and re-raised by wait() on the caller's thread. Point-to-point transfers do not
// come here: they are posted on the caller's thread and completed by their waiter
// (mpi_request.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dist/work.h"

namespace tessera {
namespace dist {

class CommThread {
 public:
  using Task = std::function<void()>;

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

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dist
}  // namespace tessera
