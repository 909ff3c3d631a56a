// Bytes per transformer layer under tensor, sequence and context parallelism
// (cost/sequence_traffic.h), against the figures worked out by hand.
#include "cost/sequence_traffic.h"

#include <gtest/gtest.h>

#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

// GPT-2's layer, h = 768, b = 1, s = 1024, f32: s b h p = 3,145,728 bytes.
constexpr double kSbhP = 1024.0 * 768 * 4;

TEST(SequenceTraffic, TensorParallelismIsFourAllReducesPerLayer) {
  const auto rows = sequence_layer_traffic(1, 1024, 768, 4, {2, false, 1});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].technique, "tensor parallelism");
  EXPECT_DOUBLE_EQ(rows[0].bytes, 4 * kSbhP);  // 4 x 2 (T-1)/T at T = 2
}

TEST(SequenceTraffic, SequenceParallelismIsTheAllReducesPlusTheBackwardGathers) {
  const auto rows = sequence_layer_traffic(1, 1024, 768, 4, {4, true, 1});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].technique, "sequence parallelism");
  // (8 + 2) x 3/4 sbh p, and 2 x 3/4 x (2 LayerNorms x 2 + 2 biases) x 768 x 4 bytes.
  EXPECT_DOUBLE_EQ(rows[0].bytes, 7.5 * kSbhP + 1.5 * 6 * 768 * 4);
}

TEST(SequenceTraffic, RingAttentionSendsKAndVAroundTwiceAndTheGradientsOnce) {
  const auto rows = sequence_layer_traffic(1, 1024, 768, 4, {1, false, 4});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].technique, "ring attention");
  EXPECT_DOUBLE_EQ(rows[0].bytes, 6 * 0.75 * kSbhP);  // (2 + 2 + 2) x 3 blocks of s/4 b h
  EXPECT_EQ(rows[1].technique, "ulysses");
  EXPECT_DOUBLE_EQ(rows[1].bytes, 8 * 0.75 * kSbhP / 4);  // 8 all-to-alls of 3/4 of s/4 b h
  // Beside T = 2: the tensor-parallel terms over s/C tokens, the ring's over h/T.
  const auto both = sequence_layer_traffic(1, 1024, 768, 4, {2, false, 4});
  ASSERT_EQ(both.size(), 3u);
  EXPECT_DOUBLE_EQ(both[0].bytes, 4 * kSbhP / 4);
  EXPECT_DOUBLE_EQ(both[1].bytes, 6 * 0.75 * kSbhP / 2);
}

TEST(SequenceTraffic, ErrorsNameTheValues) {
  testing::expect_error([] { sequence_layer_traffic(1, 64, 32, 4, {1, true, 1}); },
                        "sequence parallelism needs T > 1");
  testing::expect_error([] { sequence_layer_traffic(1, 64, 32, 4, {0, false, 1}); },
                        "T = 0, C = 1 (each must be >= 1)");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
