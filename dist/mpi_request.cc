#include "dist/mpi_request.h"

#include <chrono>
#include <thread>

#include "dist/mpi_check.h"

namespace tessera {
namespace dist {

int wait_all(std::vector<MPI_Request>& requests, std::vector<MPI_Status>& statuses) {
  statuses.resize(requests.size());
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
  }
}

RequestWork::RequestWork(MPI_Request request, std::vector<Tensor> buffers,
                         std::function<void()> on_complete)
    : request_(request), buffers_(std::move(buffers)), on_complete_(std::move(on_complete)) {}

RequestWork::~RequestWork() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  std::vector<MPI_Request> requests{request_};
  std::vector<MPI_Status> statuses;
  wait_all(requests, statuses);  // no throwing from a destructor: the error is dropped
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
  if (!done_) {
    std::vector<MPI_Request> requests{request_};
    std::vector<MPI_Status> statuses;
    finish(wait_all(requests, statuses));
  }
  if (rc_ != MPI_SUCCESS) detail::mpi_fail(rc_, "MPI_Wait (point-to-point)", __FILE__, __LINE__);
}

bool RequestWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_) {
    int flag = 0;
    const int rc = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag) finish(rc);
  }
  return done_;
}

}  // namespace dist
}  // namespace tessera
