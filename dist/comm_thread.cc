#include "dist/comm_thread.h"

#include <chrono>

#include "dist/mpi_check.h"

namespace tessera {
namespace dist {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() { shutdown(); }

void CommThread::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Work> CommThread::submit(Task task) {
  auto work = std::make_shared<FutureWork>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TS_CHECK(!stop_, "CommThread: the process group has been shut down");
    queue_.push_back({std::move(task), work});
  }
  wake_.notify_all();
  return work;
}

void CommThread::loop() {
  while (true) {
    Item item;
    bool have = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (pending_.empty()) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      } else {
        // Transfers are in flight: look again soon even if nothing new arrives.
        wake_.wait_for(lock, std::chrono::microseconds(100), [&] { return !queue_.empty(); });
      }
      if (!queue_.empty()) {
        item = std::move(queue_.front());
        queue_.pop_front();
        have = true;
      } else if (stop_ && pending_.empty()) {
        return;
      }
    }
    if (have) {
      item.work->mark_started();
      try {
        InFlight transfer = item.task();
        // Drop the task (and the tensors it captured) before anyone can see the work done:
        // a waiter that frees its buffers must really free them (allocator counts included).
        item.task = nullptr;
        if (transfer.requests.empty()) {
          if (transfer.on_complete) transfer.on_complete();
          item.work->mark_done();
        } else {
          pending_.push_back({std::move(transfer), item.work});
        }
      } catch (...) {
        item.work->mark_done(std::current_exception());
      }
    }
    for (size_t i = 0; i < pending_.size();) {
      int done = 0;
      InFlight& t = pending_[i].transfer;
      try {
        MPI_CHECK(MPI_Testall(static_cast<int>(t.requests.size()), t.requests.data(), &done,
                              MPI_STATUSES_IGNORE));
        if (done && t.on_complete) t.on_complete();
      } catch (...) {
        pending_[i].work->mark_done(std::current_exception());
        done = -1;
      }
      if (done == 1) pending_[i].work->mark_done();
      if (done != 0) {
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
}

}  // namespace dist
}  // namespace tessera
