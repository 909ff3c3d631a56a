// DDP's bytes per step under gradient compression for a tiny model, by hand.
#include "cost/compression.h"

#include <gtest/gtest.h>

#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

// A weight [20, 30] and its bias [20], then a weight [4, 20]: psi = 600 + 20 + 80 = 700. With a
// first bucket of 1e-3 MB (1048.576 bytes): [head.weight 320 B, a.bias 80 B, a.weight 2400 B]
// closes at 2800 B, so one bucket of 700 elements.
ModelProfile tiny_model(bool with_shapes) {
  ModelProfile m;
  m.name = "tiny";
  m.batch = 4;
  m.layers = {{"a", {600, 20}, 20}, {"head", {80}, 4}};
  if (with_shapes) {
    m.layers[0].parameter_shapes = {{20, 30}, {20}};
    m.layers[1].parameter_shapes = {{4, 20}};
  }
  return m;
}

TrafficOptions on(int ranks) {
  TrafficOptions o;
  o.ranks = ranks;
  o.first_bucket_mb = 1e-3;
  o.bucket_cap_mb = 1;
  return o;
}

double only_bytes(const std::vector<Transfer>& rows, const std::string& collective, int64_t calls) {
  EXPECT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].collective, collective);
  EXPECT_EQ(rows[0].calls, calls);
  return rows[0].bytes;
}

TEST(CompressedTraffic, EachCompressorsMessageOnFourRanks) {
  const ModelProfile m = tiny_model(true);
  const int n = 700;
  // fp16: one all-reduce of 2n bytes, 2 (N-1)/N of it sent.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(m, "fp16", on(4)), "all_reduce", 1), 1.5 * 2 * n);
  // random-k 10%: ceil(70) values of 4 bytes, all-reduced.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(m, "randomk:0.1", on(4)), "all_reduce", 1), 1.5 * 4 * 70);
  // top-k 10%: 70 (index, value) pairs, all-gathered: (N-1) x 560.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(m, "topk:0.1", on(4)), "all_gather", 1), 3 * 560);
  // sign: a 4-byte scale and ceil(700 / 8) = 88 bytes of signs.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(m, "sign", on(4)), "all_gather", 1), 3 * (4 + 88));
  // QSGD with 1 level: 2 bits per entry, 175 bytes, and a norm per 512 entries: 2 of them.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(m, "qsgd:1", on(4)), "all_gather", 1), 3 * (8 + 175));
  // One norm for the whole bucket (qsgd's format before issue 49): 4 + 175.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(m, "qsgd:1:700", on(4)), "all_gather", 1), 3 * (4 + 175));
  EXPECT_EQ(compressed_ddp_traffic(m, "sign", on(4))[0].strategy, "ddp+sign");
}

TEST(CompressedTraffic, PowerSGDFromTheShapes) {
  // Rank 2: [20, 30] is compressed (2 x 50 x 2 = 200 < 600), [4, 20] is not (2 x 24 x 2 = 96 is
  // not < 80), nor the bias. U = 80 + 20 = 100, P = 20 x 2 = 40, Q = 30 x 2 = 60: three
  // all-reduces of 200 f32 in all, 2 (N-1)/N x 4 x 200 on 2 ranks.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(tiny_model(true), "powersgd:2", on(2)), "all_reduce", 3),
                   4.0 * 200);
  // Without shapes every parameter is a vector: nothing compressed, one all-reduce of psi.
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(tiny_model(false), "powersgd:2", on(2)), "all_reduce", 1),
                   4.0 * 700);
}

TEST(CompressedTraffic, OneRankSendsNothingAndBadNamesAreErrors) {
  EXPECT_DOUBLE_EQ(only_bytes(compressed_ddp_traffic(tiny_model(true), "topk:0.1", on(1)), "all_gather", 0), 0);
  testing::expect_error([] { compressed_ddp_traffic(tiny_model(true), "none", on(2)); }, "give a compressor");
  testing::expect_error([] { compressed_ddp_traffic(tiny_model(true), "zip", on(2)); }, "zip");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
