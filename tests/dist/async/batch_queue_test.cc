// SharedBatchQueue alone: each of an epoch's batches goes out exactly once, in order, to
// whoever asks; each worker is told once that the epoch ended; a later epoch starts only when
// every worker was told; ranks that disagree on the epoch get an error naming both.
#include "dist/async/batch_queue.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace {

using testing::expect_error;
constexpr int64_t kEnd = SharedBatchQueue::kEpochEnd;

TEST(SharedBatchQueue, HandsOutEachBatchOnceInOrderToWhoeverAsks) {
  SharedBatchQueue q(5, 3);
  EXPECT_TRUE(q.epoch_over());  // nothing started
  // Worker 2 is fast, worker 0 slow: the numbers go out in order whoever asks.
  EXPECT_EQ(q.next(2, 1), 0);
  EXPECT_EQ(q.next(2, 1), 1);
  EXPECT_EQ(q.next(0, 1), 2);
  EXPECT_EQ(q.next(2, 1), 3);
  EXPECT_EQ(q.next(1, 1), 4);
  EXPECT_FALSE(q.epoch_over());
  EXPECT_EQ(q.next(2, 1), kEnd);
  EXPECT_EQ(q.next(1, 1), kEnd);
  EXPECT_FALSE(q.epoch_over());  // worker 0 is still on batch 2
  EXPECT_EQ(q.next(0, 1), kEnd);
  EXPECT_TRUE(q.epoch_over());
  EXPECT_EQ(q.batches_per_worker(), (std::vector<int64_t>{1, 1, 3}));
  // The next epoch starts over at 0; the counts go on.
  EXPECT_EQ(q.next(0, 2), 0);
  EXPECT_EQ(q.epoch(), 2);
  EXPECT_EQ(q.batches_per_worker(), (std::vector<int64_t>{2, 1, 3}));
}

TEST(SharedBatchQueue, EveryWorkerToldTheEndOnceAndEpochsDoNotOverlap) {
  SharedBatchQueue q(1, 2);
  EXPECT_EQ(q.next(0, 0), 0);
  EXPECT_EQ(q.next(0, 0), kEnd);
  expect_error([&] { q.next(0, 0); }, "worker 0 asks again after it was told epoch 0 ended");
  // Worker 0 runs ahead to epoch 1 while worker 1 has not been told epoch 0 ended.
  for (const char* part : {"worker 0 asks for a batch of epoch 1 while epoch 0 runs",
                           "1 of 1 batches handed out, 1 of 2 workers done", "disagree on the epoch"}) {
    expect_error([&] { q.next(0, 1); }, part);
  }
  EXPECT_EQ(q.next(1, 0), kEnd);
  EXPECT_EQ(q.next(1, 1), 0);
  expect_error([&] { q.next(0, 0); }, "epoch 0 while epoch 1 runs");
}

// A resumed run's queue: a fresh one (the position of "epoch over") with the counts so far; the
// next epoch adds to them. Mid-epoch there is nothing a checkpoint could have saved.
TEST(SharedBatchQueue, ResumedBetweenEpochsCountsOnFromTheCheckpoint) {
  SharedBatchQueue q(2, 2);
  q.restore_batches_per_worker({3, 1});
  EXPECT_EQ(q.next(1, 2), 0);
  EXPECT_EQ(q.next(1, 2), 1);
  EXPECT_EQ(q.batches_per_worker(), (std::vector<int64_t>{3, 3}));
  expect_error([&] { q.restore_batches_per_worker({0, 0}); }, "while epoch 2 runs");
  EXPECT_EQ(q.next(0, 2), kEnd);
  EXPECT_EQ(q.next(1, 2), kEnd);
  expect_error([&] { q.restore_batches_per_worker({1}); }, "1 batch counts for 2 workers");
  expect_error([&] { q.restore_batches_per_worker({1, -1}); }, "worker 1 took -1 batches");
}

TEST(SharedBatchQueue, BadSizesNameTheValues) {
  expect_error([] { SharedBatchQueue(0, 2); }, "0 batches per epoch");
  expect_error([] { SharedBatchQueue(4, 0); }, "0 workers");
  SharedBatchQueue q(4, 2);
  expect_error([&] { q.next(2, 0); }, "worker 2 of 2");
}

}  // namespace
}  // namespace dist
}  // namespace tessera
