#include "dist/comm_thread.h"

#include "tensor/check.h"

namespace tessera {
namespace dist {

CommThread::CommThread(const std::string& group)
    : track_(trace::TraceRecorder::global().add_comm_track(group)), thread_([this] { loop(); }) {}

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
  Item item{std::move(task), work};
  if (trace::recording()) {
    item.traced = true;
    const trace::CollectiveLabel* label = trace::CollectiveLabel::current();
    item.event.name = label ? label->name() : "collective";
    item.event.category = label ? label->category() : "collective";
    if (label) item.event.args = label->args();
    item.event.track = track_;
    item.event.step = trace::TraceRecorder::global().step();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TS_CHECK(!stop_, "CommThread: the process group has been shut down");
    queue_.push_back(std::move(item));
  }
  wake_.notify_all();
  return work;
}

void CommThread::record(Item& item, double started, double finished) {
  item.event.start = started;
  item.event.end = finished;
  trace::TraceRecorder::global().record(std::move(item.event));
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
      if (item.traced) record(item, item.work->started_at(), steady_seconds());
      item.work->mark_done();
    } catch (...) {
      item.task = nullptr;
      item.work->mark_done(std::current_exception());
    }
  }
}

}  // namespace dist
}  // namespace tessera
