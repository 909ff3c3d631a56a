#include "dist/comm_thread.h"

#include "tensor/check.h"

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
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped, and everything queued is done
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item.work->mark_started();
    try {
      item.task();
      // Drop the task (and the tensors it captured) before anyone can see the work done:
      // a waiter that frees its buffers must really free them (allocator counts included).
      item.task = nullptr;
      item.work->mark_done();
    } catch (...) {
      item.task = nullptr;
      item.work->mark_done(std::current_exception());
    }
  }
}

}  // namespace dist
}  // namespace tessera
