// One rank throwing ends the whole job with a non-zero exit and the message, within seconds,
// instead of leaving the other ranks waiting in a collective forever; ranks that pass a
// collective different sizes are told so; a worker of asynchronous SGD dying ends the job
// too (the parameter server does not wait for it forever); an error every rank meets is printed
// once; a timeout's desync report names the collective each other rank is in or was in last.
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
// How often `part` occurs in `text`.
size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// An error every rank meets is printed once, by rank 0 (the others, waiting their turn, are
// ended by its MPI_Abort).
TEST(Abort, AnErrorEveryRankMeetsIsPrintedOnce) {
  const auto [exit_code, out] = tessera::testing::run_command(g_runner + " 3 " + g_helper + " all");
  EXPECT_TRUE(exit_code > 0) << out;
  EXPECT_EQ(count(out, "every rank fails alike"), 1u) << out;
  EXPECT_EQ(count(out, "[rank 0] error: "), 1u) << out;
}

// The timeout's desync report says which collective the other ranks are in, or were in last:
// a rank busy in its own code answers with its last collective, one whose program has ended
// says so.
TEST(Abort, TheDesyncReportNamesEachRanksCollective) {
  const auto computing = tessera::testing::run_command(g_runner + " 3 " + g_helper + " computing");
  const std::string& out = computing.output;
  EXPECT_TRUE(computing.exit_code > 0) << out;
  EXPECT_EQ(count(out, "desync report"), 1u) << out;
  EXPECT_NE(out.find("[rank 0] error: collective timeout: all_reduce #2 ("), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1: not waiting for any rank (computing, or between collectives); its "
                     "last wait, all_reduce #1 ("),
            std::string::npos) << out;
  // Rank 2 waits in #2 too, or has timed out in it already (its report is not printed).
  const bool two_in_2 = out.find("rank 2: waiting ") != std::string::npos ||
                        out.find("rank 2: timed out in all_reduce #2 (") != std::string::npos;
  EXPECT_TRUE(two_in_2) << out;
  EXPECT_NE(out.find(" in all_reduce #2 ("), std::string::npos) << out;

  const auto unjoined = tessera::testing::run_command(g_runner + " 2 " + g_helper + " unjoined");
  EXPECT_TRUE(unjoined.exit_code > 0) << unjoined.output;
  EXPECT_NE(unjoined.output.find("[rank 0] error: collective timeout: all_reduce #1 ("),
            std::string::npos) << unjoined.output;
  EXPECT_NE(unjoined.output.find(" in dist::finalize (this rank's program has ended)"),
            std::string::npos) << unjoined.output;
  EXPECT_NE(unjoined.output.find("rank 1: waiting "), std::string::npos) << unjoined.output;
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
