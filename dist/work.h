// Work: the handle of an asynchronous communication.
//
// Collectives are queued to a group's communication thread and return at once with a Work;
// wait() blocks until the operation is done and re-raises, on the caller's thread, any error
// the communication thread hit. A Work may also chain a step to run after it completes (the
// fp16 compression hook decompresses that way).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

namespace tessera {
namespace dist {

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until done; rethrows the operation's error. Safe to call more than once.
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};

// Completed by whoever runs the operation (the communication thread), which also stamps when
// it started and finished the work (steady-clock seconds), for timelines.
class FutureWork : public Work {
 public:
  void wait() override;
  bool is_completed() override;
  void mark_started();
  void mark_done(std::exception_ptr error = nullptr);
  double started_at() const { return started_at_; }
  double finished_at() const { return finished_at_; }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  double started_at_ = 0, finished_at_ = 0;
};

// Seconds on the steady clock (the time base of Work and DDP timestamps).
double steady_seconds();

// `inner`, then `then` (run once, on the thread that first waits).
class ChainedWork : public Work {
 public:
  ChainedWork(std::shared_ptr<Work> inner, std::function<void()> then)
      : inner_(std::move(inner)), then_(std::move(then)) {}
  void wait() override;
  bool is_completed() override;

 private:
  std::shared_ptr<Work> inner_;
  std::function<void()> then_;
  std::once_flag once_;
};

// A Work that is already done (world size 1, empty tensors).
std::shared_ptr<Work> completed_work();

}  // namespace dist
}  // namespace tessera
