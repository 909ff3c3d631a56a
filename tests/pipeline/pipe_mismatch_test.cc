// Ranks of one pipeline given different batches (a user's program fallen out of step): the
// stage that receives a micro-batch of another size than its own cut of its batch says so,
// naming both sizes, before any layer or loss fails on it. 2 ranks; the other rank, left
// waiting, ends through the collective timeout (in a program, run_or_abort ends the job).
#include <gtest/gtest.h>

#include <string>

#include "dist/collective_timeout.h"
#include "autograd/functions.h"
#include "dist/environment.h"
#include "pipeline/pipe.h"
#include "tests/pipeline/mlp.h"
#include "tests/pipeline/pipe_reference.h"

namespace tessera {
namespace pipeline {
namespace {

TEST(Pipe, StagesGivenDifferentBatchesAreToldSo) {
  auto world = dist::world();
  ASSERT_EQ(world->size(), 2);
  dist::set_collective_timeout(3);
  Pipe pipe(mlp_of(13, {64, 32, 32, 10}), world,
            [](const Variable& out, const Tensor& y) { return cross_entropy(out, y); },
            PipeOptions().microbatches(4));
  // Rank 0 cuts 8 rows into micro-batches of 2; rank 1 cuts 500 rows into micro-batches of 125.
  const Batch b = make_batch(0, world->rank() == 0 ? 8 : 500, {1, 8, 8});
  try {
    pipe.train_step(b.x, b.y);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    if (world->rank() == 1) {
      EXPECT_NE(message.find("pipeline: rank 1 (virtual stage 1) received micro-batch 0 with 2 "
                             "rows from rank 0, but its own batch of 500 rows in 4 micro-batches "
                             "makes it 125 rows: the stages were given different batches"),
                std::string::npos) << message;
    } else {
      EXPECT_NE(message.find("collective timeout"), std::string::npos) << message;
    }
  }
  dist::set_collective_timeout(0);  // the test main's closing all-reduce waits for the slower rank
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
