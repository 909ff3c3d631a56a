// The train tool on 2 ranks under mpirun: DDP and ZeRO-1 both learn, report world_size 2, send
// the ring all-reduce's bytes per step, and ZeRO-1 holds half the optimizer state per rank.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/util/test_util.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::last_json_line;

std::string g_runner, g_train;

tessera::testing::CommandResult run(const std::string& flags) {
  return tessera::testing::run_command(g_runner + " 2 " + g_train + " " + flags);
}

TEST(TrainDistributed, DdpAndZero1Learn) {
  // logistic regression: 7850 f32 parameters; a 2-rank ring all-reduce sends 2 * 1/2 of them.
  const int64_t ring_bytes = 7850 * 4;
  for (const char* strategy : {"ddp", "zero1"}) {
    const auto r = run(std::string("--model=logistic --train-limit=4000 --epochs=3 --threads=1 --strategy=") +
                         strategy);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    ASSERT_FALSE(s.empty()) << r.output;
    EXPECT_EQ(json_number(s, "world_size"), 2) << s;
    EXPECT_GT(json_number(s, "test_accuracy"), 0.75) << s;
    EXPECT_EQ(json_number(s, "comm_bytes_per_step"), ring_bytes) << s;
    EXPECT_EQ(json_field(s, "strategy"), std::string("\"") + strategy + "\"");
    // Adam holds two f32 moments: 62,800 bytes unsharded, half of that per ZeRO-1 rank.
    EXPECT_EQ(json_field(s, "optimizer_state_bytes_per_rank"),
              std::string(strategy) == "zero1" ? "[31400, 31400]" : "[62800, 62800]")
        << s;
  }
}

TEST(TrainDistributed, BadFlagOnEveryRankExitsWithTwo) {
  const auto r = run("--strategy=zero9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--strategy must be one of single|ddp|zero1"), std::string::npos) << r.output;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: train_distributed_test MPI_RUN TRAIN\n");
    return 2;
  }
  g_runner = argv[1];
  g_train = argv[2];
  return RUN_ALL_TESTS();
}
