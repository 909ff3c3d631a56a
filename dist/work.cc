#include "dist/work.h"

#include <chrono>

namespace tessera {
namespace dist {

void FutureWork::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool FutureWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void FutureWork::mark_started() { started_at_ = steady_seconds(); }

void FutureWork::mark_done(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_at_ = steady_seconds();
    done_ = true;
    error_ = error;
  }
  done_cv_.notify_all();
}

void ChainedWork::wait() {
  inner_->wait();
  std::call_once(once_, then_);
}

bool ChainedWork::is_completed() { return inner_->is_completed(); }

std::shared_ptr<Work> completed_work() {
  auto work = std::make_shared<FutureWork>();
  work->mark_done();
  return work;
}

}  // namespace dist
}  // namespace tessera
