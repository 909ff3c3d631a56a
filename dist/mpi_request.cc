#include "dist/mpi_request.h"

#include <chrono>
#include <string>
#include <thread>

#include "dist/collective_timeout.h"
#include "dist/desync_report.h"
#include "dist/environment.h"
#include "dist/mpi_check.h"

namespace tessera {
namespace dist {

namespace {

// After a timeout: the transfers still posted are cancelled and completed before the error
// unwinds the stack that owns their buffers (a receive's late message would otherwise be
// written into freed memory). A receive's cancel completes at once; a send that can be neither
// cancelled nor finished within a second pins its buffer, so the job ends here instead.
void cancel_posted(std::vector<MPI_Request>& requests, const std::string& why) {
  for (MPI_Request& r : requests) {
    if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<MPI_Status> statuses(requests.size());
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
    if (done) return;
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) abort_job(why);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

int wait_all(std::vector<MPI_Request>& requests, std::vector<MPI_Status>& statuses) {
  statuses.resize(requests.size());
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0;; ++round) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                               statuses.data());
    if (rc != MPI_SUCCESS || done) return rc;
    if (round < 20000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (round % 256 == 255) {  // collective_timeout.h: a peer that never answers ends the job
      answer_desync_queries();   // another rank timed out and asks what this one is doing
      try {
        check_collective_timeout(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      } catch (const CollectiveTimeout& e) {
        const std::string message = e.what() + desync_report();
        cancel_posted(requests, message);
        throw CollectiveTimeout(message);
      }
    }
  }
}

void PendingRequest::set(MPI_Request request, int rc) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request_ = request;
    rc_ = rc;
    posted_ = true;
  }
  posted_cv_.notify_all();
}

bool PendingRequest::take(bool block, MPI_Request* request, int* rc) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (block) posted_cv_.wait(lock, [&] { return posted_; });
  if (!posted_) return false;
  *request = request_;
  *rc = rc_;
  return true;
}

RequestWork::RequestWork(MPI_Request request, std::vector<Tensor> buffers,
                         std::function<void()> on_complete, std::string what, int peer)
    : request_(request), buffers_(std::move(buffers)), on_complete_(std::move(on_complete)),
      what_(std::move(what)), peer_(peer) {}

RequestWork::RequestWork(std::shared_ptr<PendingRequest> pending, std::vector<Tensor> buffers,
                         std::string what, int peer)
    : pending_(std::move(pending)), buffers_(std::move(buffers)), what_(std::move(what)),
      peer_(peer) {}

bool RequestWork::posted(bool block) {
  if (!pending_) return true;
  int rc = MPI_SUCCESS;
  if (!pending_->take(block, &request_, &rc)) return false;
  pending_ = nullptr;
  if (rc != MPI_SUCCESS) {
    failed_call_ = "MPI_Isend (a send held by network emulation)";
    finish(rc);
  }
  return true;
}

RequestWork::~RequestWork() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  posted(/*block=*/true);  // the group's DelayLine posts everything it holds, even at shutdown
  if (done_) return;
  if (std::uncaught_exceptions() > 0) {
    // Unwinding from an error (a timeout, say) that is about to end the job: waiting again
    // would only hide it. The buffers stay allocated for the transfer still posted.
    new std::vector<Tensor>(std::move(buffers_));  // deliberately leaked
    return;
  }
  const WaitingFor waiting(what_, peer_);
  std::vector<MPI_Request> requests{request_};
  std::vector<MPI_Status> statuses;
  try {
    wait_all(requests, statuses);  // no throwing from a destructor: the error is dropped
  } catch (const CollectiveTimeout& e) {
    abort_job(e.what());  // the buffers cannot be freed under a transfer still posted
  }
}

void RequestWork::finish(int rc) {
  done_ = true;
  rc_ = rc;
  if (rc == MPI_SUCCESS && on_complete_) on_complete_();
  on_complete_ = nullptr;
  buffers_.clear();
}

void RequestWork::wait() {
  std::lock_guard<std::mutex> lock(mutex_);
  const WaitingFor waiting(what_, peer_);
  if (!done_) posted(/*block=*/true);
  if (!done_) {
    std::vector<MPI_Request> requests{request_};
    std::vector<MPI_Status> statuses;
    finish(wait_all(requests, statuses));
  }
  if (rc_ != MPI_SUCCESS) detail::mpi_fail(rc_, failed_call_, __FILE__, __LINE__);
}

bool RequestWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_ && posted(/*block=*/false) && !done_) {
    int flag = 0;
    const int rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag) finish(rc);
  }
  return done_;
}

}  // namespace dist
}  // namespace tessera
