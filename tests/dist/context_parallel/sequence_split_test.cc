// The sequence split of context parallelism (dist/context_parallel/sequence_split.h), as
// literal tables: each rank's positions under head-tail and contiguous order, a batch of token
// windows cut into inputs and targets, and the length errors.
#include <gtest/gtest.h>

#include <vector>

#include "dist/context_parallel/sequence_split.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace context_parallel {
namespace {

using testing::expect_error;

std::vector<int64_t> positions(int64_t t, int rank, int ranks, SequenceSplit split) {
  return rank_positions(t, rank, ranks, split).expand();
}

TEST(SequenceSplit, HeadTailGivesRankIChunksIAnd2CMinus1MinusI) {
  // T = 16, C = 4: 8 chunks of 2.
  const SequenceSplit ht = SequenceSplit::kHeadTail;
  EXPECT_EQ(positions(16, 0, 4, ht), (std::vector<int64_t>{0, 1, 14, 15}));
  EXPECT_EQ(positions(16, 1, 4, ht), (std::vector<int64_t>{2, 3, 12, 13}));
  EXPECT_EQ(positions(16, 2, 4, ht), (std::vector<int64_t>{4, 5, 10, 11}));
  EXPECT_EQ(positions(16, 3, 4, ht), (std::vector<int64_t>{6, 7, 8, 9}));
  EXPECT_EQ(rank_positions(16, 3, 4, ht).runs.size(), 1u);  // chunks 3 and 4 are one run
  EXPECT_EQ(positions(4, 0, 1, ht), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(SequenceSplit, ContiguousGivesRankIChunks2IAnd2IPlus1) {
  const SequenceSplit c = SequenceSplit::kContiguous;
  EXPECT_EQ(positions(12, 0, 3, c), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(positions(12, 1, 3, c), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(positions(12, 2, 3, c), (std::vector<int64_t>{8, 9, 10, 11}));
}

TEST(SequenceSplit, RankBatchTakesInputsAndNextTokenTargets) {
  // Two windows of T + 1 = 9 tokens: 100.. and 200..
  std::vector<int64_t> tokens;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 9; ++i) tokens.push_back(100 * (b + 1) + i);
  }
  const Tensor windows = from_vector<int64_t>(tokens, {2, 9});
  const RankBatch r1 = rank_batch(windows, 1, 2, SequenceSplit::kHeadTail);  // positions 2 3 4 5
  EXPECT_EQ(r1.inputs.to_vector<int64_t>(),
            (std::vector<int64_t>{102, 103, 104, 105, 202, 203, 204, 205}));
  EXPECT_EQ(r1.targets.to_vector<int64_t>(),
            (std::vector<int64_t>{103, 104, 105, 106, 203, 204, 205, 206}));
  const RankBatch r0 = rank_batch(windows, 0, 2, SequenceSplit::kHeadTail);  // 0 1 6 7
  EXPECT_EQ(r0.inputs.to_vector<int64_t>(),
            (std::vector<int64_t>{100, 101, 106, 107, 200, 201, 206, 207}));
  EXPECT_EQ(r0.targets.to_vector<int64_t>(),
            (std::vector<int64_t>{101, 102, 107, 108, 201, 202, 207, 208}));
}

TEST(SequenceSplit, ErrorsNameTheLengthAndTheRanks) {
  expect_error([] { rank_positions(18, 0, 4, SequenceSplit::kHeadTail); },
               "context parallelism over 4 ranks cuts the sequence into 2 x 4 = 8 equal chunks, "
               "and a sequence of 18 tokens does not divide by 8");
  expect_error([] { rank_positions(16, 4, 4, SequenceSplit::kHeadTail); },
               "rank 4 of a group of 4");
  expect_error([] { parse_split("striped"); }, "'striped' is not head-tail or contiguous");
  expect_error(
      [] {
        rank_batch(zeros({2, 1}, kI64), 0, 1, SequenceSplit::kHeadTail);
      },
      "expected token windows [B, T + 1], got shape [2, 1]");
}

}  // namespace
}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
