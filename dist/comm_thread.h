// CommThread: runs a process group's collectives, in issue order, off the caller's thread.
//
// Each task completes its communication before returning (the ring collectives wait for their
// MPI requests); the task's Work completes when it has. An exception in a task is stored in
// its Work and re-raised by wait() on the caller's thread. Point-to-point transfers do not
// come here: they are posted on the caller's thread and completed by their waiter
// (mpi_request.h).
//
// While a trace is recording (trace_recorder.h), each task is stamped on this thread's own track
// from the moment it starts to the moment it finishes, under the CollectiveLabel alive on the
// thread that submitted it, and counted in the step it was submitted in.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/trace_recorder.h"
#include "dist/work.h"

namespace tessera {
namespace dist {

class CommThread {
 public:
  using Task = std::function<void()>;

  // `group` names whose collectives run here, for the trace's track ("ranks 0-3, world").
  explicit CommThread(const std::string& group = "");
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
    bool traced = false;  // submitted while a trace was recording
    trace::Event event;   // its name, category, args and step, when traced
  };
  static void record(Item& item, double started, double finished);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stop_ = false;
  int track_;  // this thread's track in a trace
  std::thread thread_;
};

}  // namespace dist
}  // namespace tessera
