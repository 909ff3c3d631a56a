// A wait that times out cancels the transfers it still has posted before its error unwinds the
// buffers they would write into: a message that arrives later goes to the next receive that
// asks for it, not into memory the timed-out caller has freed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "dist/collective_timeout.h"
#include "dist/mpi_request.h"

namespace tessera {
namespace dist {
namespace {

TEST(WaitAll, ATimedOutReceiveIsCancelledBeforeItsBufferIsFreed) {
  constexpr int kTag = 4242;
  int abandoned = -1;  // the buffer a timed-out collective's caller would free while unwinding
  std::vector<MPI_Request> requests(1);
  MPI_Irecv(&abandoned, 1, MPI_INT, 0, kTag, MPI_COMM_SELF, &requests[0]);
  std::vector<MPI_Status> statuses;
  set_collective_timeout(1);
  EXPECT_THROW(wait_all(requests, statuses), CollectiveTimeout);  // nobody sends
  set_collective_timeout(0);
  EXPECT_EQ(requests[0], MPI_REQUEST_NULL) << "the receive is still posted";

  // The late message: a fresh receive gets it, and the abandoned buffer stays untouched.
  const int late = 7;
  MPI_Send(&late, 1, MPI_INT, 0, kTag, MPI_COMM_SELF);
  int pending = 0;
  for (int i = 0; i < 1000 && !pending; ++i) {
    MPI_Iprobe(0, kTag, MPI_COMM_SELF, &pending, MPI_STATUS_IGNORE);
    if (!pending) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(pending) << "the late message went to the abandoned receive";
  int fresh = -1;
  MPI_Recv(&fresh, 1, MPI_INT, 0, kTag, MPI_COMM_SELF, MPI_STATUS_IGNORE);
  EXPECT_EQ(fresh, 7);
  EXPECT_EQ(abandoned, -1) << "a late message was written into the abandoned buffer";
}

}  // namespace
}  // namespace dist
}  // namespace tessera
