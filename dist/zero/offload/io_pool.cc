#include "dist/zero/offload/io_pool.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace offload {

namespace {
std::atomic<int64_t> waited_ns{0};
}  // namespace

double io_wait_seconds() { return static_cast<double>(waited_ns.load()) * 1e-9; }

void IoRequest::wait() const {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->done) {
    const auto start = std::chrono::steady_clock::now();
    state_->cv.wait(lock, [&] { return state_->done; });
    waited_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - start).count();
  }
  TS_CHECK(state_->error.empty(), state_->error);
}

bool IoRequest::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

IoPool::IoPool(int threads) {
  TS_CHECK(threads >= 1, "IoPool: needs at least one thread, got ", threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

IoPool::~IoPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

namespace {

// Moves every byte (pread and pwrite may move fewer than asked), or says why not.
std::string transfer(bool is_write, int fd, const std::string& path, char* data, int64_t bytes,
                     int64_t offset) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = is_write ? ::pwrite(fd, data + done, bytes - done, offset + done)
                               : ::pread(fd, data + done, bytes - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return std::string("offload: ") + (is_write ? "writing " : "reading ") +
             std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " of '" + path +
             "' failed after " + std::to_string(done) + ": " +
             (n < 0 ? std::strerror(errno) : "end of file");
    }
    done += n;
  }
  return "";
}

}  // namespace

IoRequest IoPool::read(int fd, const std::string& path, void* data, int64_t bytes, int64_t offset) {
  return submit([=]() {
    const std::string error = transfer(false, fd, path, static_cast<char*>(data), bytes, offset);
    if (!error.empty()) throw std::runtime_error(error);
  });
}

IoRequest IoPool::write(int fd, const std::string& path, const void* data, int64_t bytes,
                        int64_t offset) {
  return submit([=]() {
    const std::string error =
        transfer(true, fd, path, static_cast<char*>(const_cast<void*>(data)), bytes, offset);
    if (!error.empty()) throw std::runtime_error(error);
  });
}

IoRequest IoPool::submit(std::function<void()> job) {
  IoRequest request;
  request.state_ = std::make_shared<IoRequest::State>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(job), request.state_);
  }
  cv_.notify_one();
  return request;
}

void IoPool::run() {
  for (;;) {
    std::pair<std::function<void()>, std::shared_ptr<IoRequest::State>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string error;
    try {
      item.first();
    } catch (const std::exception& e) {
      error = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(item.second->mu);
      item.second->done = true;
      item.second->error = std::move(error);
    }
    item.second->cv.notify_all();
  }
}

}  // namespace offload
}  // namespace dist
}  // namespace tessera
