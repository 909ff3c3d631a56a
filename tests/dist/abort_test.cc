// One rank throwing ends the whole job with a non-zero exit and the message, within seconds,
// instead of leaving the other ranks waiting in a collective forever; ranks that pass a
// collective different sizes are told so; a worker of asynchronous SGD dying ends the job
// too (the parameter server does not wait for it forever).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "tests/util/test_util.h"

namespace {
std::string g_runner, g_helper;

TEST(Abort, OneRankThrowingEndsTheJob) {
  const auto start = std::chrono::steady_clock::now();
  const auto [exit_code, out] = tessera::testing::run_command(g_runner + " 2 " + g_helper + " throw");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(exit_code > 0) << out;
  EXPECT_NE(out.find("[rank 1] error:"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 failed on purpose"), std::string::npos) << out;
  EXPECT_LT(seconds, 20.0);
}

TEST(Abort, AWorkerDyingEndsAsynchronousTraining) {
  const auto start = std::chrono::steady_clock::now();
  const auto [exit_code, out] = tessera::testing::run_command(g_runner + " 3 " + g_helper + " async");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(exit_code > 0) << out;
  EXPECT_NE(out.find("worker rank 2 failed on purpose"), std::string::npos) << out;
  EXPECT_LT(seconds, 20.0);
}

TEST(Abort, RanksDisagreeingOnACollectivesSizeAreTold) {
  const auto [exit_code, out] =
      tessera::testing::run_command(g_runner + " 2 " + g_helper + " mismatch");
  EXPECT_TRUE(exit_code > 0) << out;
  // Whichever rank sees it first names the collective, its number and sizes.
  EXPECT_NE(out.find("all_reduce #1 ("), std::string::npos) << out;
  EXPECT_NE(out.find("the ranks called this collective with different sizes"), std::string::npos)
      << out;
}
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: abort_test MPI_RUN HELPER\n");
    return 2;
  }
  g_runner = argv[1];
  g_helper = argv[2];
  return RUN_ALL_TESTS();
}
