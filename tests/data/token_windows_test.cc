// TokenWindows: windows of T + 1 tokens written out by hand for a tiny stream, the limit, and
// the windows through a DistributedSampler and the DataLoader.
#include "data/token_windows.h"

#include <gtest/gtest.h>

#include <numeric>

#include "data/data_loader.h"
#include "data/distributed_sampler.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace data {
namespace {

std::shared_ptr<const std::vector<uint16_t>> stream(std::vector<uint16_t> tokens) {
  return std::make_shared<const std::vector<uint16_t>>(std::move(tokens));
}

// 10, 11, ..., 10 + n - 1
std::shared_ptr<const std::vector<uint16_t>> counting(int n) {
  std::vector<uint16_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), 10);
  return stream(tokens);
}

TEST(TokenWindows, WindowsOfTPlusOneTokensTargetsShiftedByOne) {
  // 10 tokens, T = 4: (10 - 1) / 4 = 2 windows; the last token (19) is left over.
  const TokenWindows windows(counting(10), 4);
  ASSERT_EQ(windows.size(), 2);
  const Batch batch = windows.get_batch({1, 0});
  EXPECT_EQ(batch.inputs.dtype(), kI64);
  EXPECT_EQ(batch.inputs.shape(), (Shape{2, 4}));
  EXPECT_EQ(batch.targets.shape(), (Shape{2, 4}));
  EXPECT_EQ(batch.inputs.to_vector<int64_t>(), (std::vector<int64_t>{14, 15, 16, 17,  //
                                                                      10, 11, 12, 13}));
  EXPECT_EQ(batch.targets.to_vector<int64_t>(), (std::vector<int64_t>{15, 16, 17, 18,  //
                                                                       11, 12, 13, 14}));
}

TEST(TokenWindows, CountIsNMinusOneOverT) {
  EXPECT_EQ(TokenWindows(counting(9), 4).size(), 2);   // 9 tokens: exactly two windows
  EXPECT_EQ(TokenWindows(counting(8), 4).size(), 1);   // 8: the second would need token 8
  EXPECT_EQ(TokenWindows(counting(2), 1).size(), 1);
  EXPECT_EQ(TokenWindows(counting(11), 1).size(), 10);
}

TEST(TokenWindows, LimitKeepsTheFirstWindows) {
  const TokenWindows windows(counting(101), 10, 3);
  EXPECT_EQ(windows.size(), 3);
  EXPECT_EQ(windows.get_batch({2}).inputs.to_vector<int64_t>()[0], 30);
  EXPECT_EQ(TokenWindows(counting(101), 10, 1000).size(), 10);  // fewer than the limit: all
  tessera::testing::expect_error([&] { windows.get_batch({3}); },
                                 "window 3 out of range [0, 3)");
}

TEST(TokenWindows, RefusesStreamsTooShortAndBadSizes) {
  tessera::testing::expect_error([] { TokenWindows(counting(4), 4); },
                                 "4 tokens make no window of seq_len + 1 = 5 tokens");
  tessera::testing::expect_error([] { TokenWindows(counting(0), 4); }, "0 tokens");
  tessera::testing::expect_error([] { TokenWindows(counting(10), 0); },
                                 "seq_len must be > 0, got 0");
  tessera::testing::expect_error([] { TokenWindows(counting(10), 2, -1); },
                                 "limit must be >= 0, got -1");
}

TEST(TokenWindows, ShardedByADistributedSamplerThroughTheDataLoader) {
  // 13 tokens, T = 3: 4 windows starting at 10, 13, 16, 19. Two ranks, no shuffle: rank r
  // takes windows r, r + 2.
  auto windows = std::make_shared<TokenWindows>(counting(13), 3);
  for (int64_t rank = 0; rank < 2; ++rank) {
    auto sampler = std::make_shared<DistributedSampler>(
        windows->size(), DistributedSamplerOptions(2, rank).shuffle(false));
    DataLoader loader(windows, DataLoaderOptions(2), sampler);
    ASSERT_EQ(loader.num_batches(), 1);
    std::vector<int64_t> first_inputs;
    for (Batch& batch : loader.epoch(0)) {
      ASSERT_EQ(batch.inputs.shape(), (Shape{2, 3}));
      const std::vector<int64_t> in = batch.inputs.to_vector<int64_t>();
      first_inputs = {in[0], in[3]};
    }
    EXPECT_EQ(first_inputs, (std::vector<int64_t>{10 + 3 * rank, 16 + 3 * rank})) << rank;
  }
}

}  // namespace
}  // namespace data
}  // namespace tessera
