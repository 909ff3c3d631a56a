// Reliability of the train tool under mpirun with injected faults (--inject-fault): a rank that
// stalls makes the others' next wait time out (--collective-timeout=5), which ends the whole job
// within seconds with a message naming the collective (or transfer), its number and size, and
// the rank waited for, and a desync report of what every rank was doing; a rank that dies ends
// the job; bad values exit 2 on every rank; an error every rank meets is printed once; a
// parallel strategy on one rank says so; ranks started with different flags are told which
// and stop; a diverging loss or a non-finite gradient norm stops every rank at the same batch.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/tools/overflowing_checkpoint.h"
#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::kShortMlp;

struct Timed {
  tessera::testing::CommandResult result;
  double seconds;
};

Timed run_timed(const std::string& flags, int ranks = 2) {
  const auto start = std::chrono::steady_clock::now();
  auto r = tessera::testing::run_train(flags, ranks);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

TEST(TrainFaults, AStalledRankMakesDdpsAllReduceTimeOut) {
  const Timed t = run_timed(kShortMlp + "--strategy=ddp --inject-fault=stall:1:3 --collective-timeout=5");
  const std::string& out = t.result.output;
  EXPECT_NE(t.result.exit_code, 0) << out;
  EXPECT_LT(t.seconds, 30) << out;
  EXPECT_NE(out.find("[rank 1] --inject-fault: stalling at step 3"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 0] error: collective timeout: all_reduce #"), std::string::npos) << out;
  EXPECT_NE(out.find("203530 elements of f32"), std::string::npos) << out;  // the size
  EXPECT_NE(out.find("for a message from rank 1 (timeout 5 s)"), std::string::npos) << out;
}

// On 3 ranks with rank 1 stalled, the rank that times out asks the others what they are doing
// (the desync report): the other waiting rank answers from its wait in the same all-reduce, the
// stalled rank with the last collective it was in.
TEST(TrainFaults, TheTimeoutsDesyncReportNamesTheSilentRank) {
  const Timed t = run_timed(kShortMlp + "--strategy=ddp --inject-fault=stall:1:3 --collective-timeout=3", 3);
  const std::string& out = t.result.output;
  EXPECT_NE(t.result.exit_code, 0) << out;
  EXPECT_LT(t.seconds, 30) << out;
  EXPECT_NE(out.find("desync report (each rank's answer within 2 s):"), std::string::npos) << out;
  // The stalled rank answers from its answering thread with the last collective it was in.
  EXPECT_NE(out.find("rank 1: not waiting for any rank (computing, or between collectives); its "
                     "last wait, all_reduce #"),
            std::string::npos) << out;
  // The reporting rank (0 or 2) and the other both wait in the all-reduce for rank 1.
  const bool zero_waits = out.find("rank 0: waiting ") != std::string::npos;
  const bool two_waits = out.find("rank 2: waiting ") != std::string::npos;
  EXPECT_TRUE(zero_waits && two_waits) << out;
  EXPECT_NE(out.find("in all_reduce #"), std::string::npos) << out;
  EXPECT_NE(out.find("(this rank)"), std::string::npos) << out;
}

TEST(TrainFaults, AStalledStageMakesThePipelinesReceiveTimeOut) {
  // Stage 0 stalls after its third step: stage 1 waits for its next activation.
  const Timed t = run_timed(kShortMlp + "--strategy=pipeline --inject-fault=stall:0:3 "
                            "--collective-timeout=5");
  const std::string& out = t.result.output;
  EXPECT_NE(t.result.exit_code, 0) << out;
  EXPECT_LT(t.seconds, 30) << out;
  EXPECT_NE(out.find("[rank 1] error: collective timeout: receive from rank 0"), std::string::npos)
      << out;
}

TEST(TrainFaults, ARankThatDiesEndsTheJob) {
  const Timed t = run_timed(kShortMlp + "--strategy=ddp --inject-fault=crash:1:3");
  EXPECT_NE(t.result.exit_code, 0) << t.result.output;
  EXPECT_LT(t.seconds, 30) << t.result.output;
  EXPECT_NE(t.result.output.find("[rank 1] --inject-fault: crashing at step 3"), std::string::npos)
      << t.result.output;
}

TEST(TrainFaults, BadValuesExitTwo) {
  for (const std::string& flags : {std::string("--inject-fault=explode:1:3"),
                                   std::string("--inject-fault=stall:1:0"),
                                   std::string("--inject-fault=stall:5:3"),
                                   std::string("--inject-fault=crash-in-save:0:3"),
                                   std::string("--inject-fault=crash-in-save:0:3:after-index"),
                                   std::string("--inject-fault=crash:0:3:mid-shard"),
                                   std::string("--inject-fault=crash-in-epoch:1:0"),
                                   std::string("--inject-fault=crash-in-epoch:7:2"),
                                   std::string("--collective-timeout=-1")}) {
    const auto r = tessera::testing::run_train(kShortMlp + "--strategy=ddp " + flags, 2);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
  }
  const auto epoch = tessera::testing::run_train_single(kShortMlp + "--inject-fault=crash-in-epoch:0:0");
  EXPECT_NE(epoch.output.find("inject-fault 'crash-in-epoch:0:0': epoch '0' is not an epoch >= 1"),
            std::string::npos) << epoch.output;
}

TEST(TrainFaults, BadFlagOnEveryRankExitsWithTwo) {
  const auto r = tessera::testing::run_train("--strategy=zero9", 2);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--strategy must be one of single|ddp|zero1"), std::string::npos) << r.output;
}

// How often `part` occurs in `text`.
size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// An error every rank meets is printed once, by rank 0: a bad flag (found before MPI starts),
// a missing data file (found by every rank's loader, ending the job through MPI_Abort) and a
// missing --resume path (found by every rank's check of the paths).
TEST(TrainFaults, AnErrorEveryRankMeetsIsPrintedOnce) {
  const auto flag = tessera::testing::run_train("--stratgy=ddp", 3);
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_EQ(count(flag.output, "unknown flag --stratgy; did you mean --strategy?"), 1u) << flag.output;
  EXPECT_EQ(count(flag.output, "(run with --help for the flags)"), 1u) << flag.output;
  const auto data = tessera::testing::run_train(
      "--model=logistic --epochs=1 --threads=1 --strategy=ddp --data-dir=/nonexistent", 3);
  EXPECT_NE(data.exit_code, 0) << data.output;
  EXPECT_EQ(count(data.output, "MNIST: neither /nonexistent/"), 1u) << data.output;
  EXPECT_EQ(count(data.output, "[rank 0] error: "), 1u) << data.output;
  // A path every rank checks alike, found after MPI starts.
  const auto path = tessera::testing::run_train("--strategy=ddp --resume=/nonexistent/ck", 3);
  EXPECT_EQ(path.exit_code, 2) << path.output;
  EXPECT_EQ(count(path.output, "--resume=/nonexistent/ck: no such file or directory"), 1u)
      << path.output;
}

// A rank that fails alone is still heard, naming itself: rank 0 stalls, rank 1 alone times out
// (and the report is not printed twice).
TEST(TrainFaults, ARankThatFailsAloneIsHeard) {
  const Timed t = run_timed(kShortMlp + "--strategy=ddp --inject-fault=stall:0:3 --collective-timeout=3");
  const std::string& out = t.result.output;
  EXPECT_NE(t.result.exit_code, 0) << out;
  EXPECT_EQ(count(out, "[rank 1] error: collective timeout: all_reduce #"), 1u) << out;
  EXPECT_EQ(count(out, "error: "), 1u) << out;
  EXPECT_EQ(count(out, "desync report"), 1u) << out;
}

// A strategy that shares the work between ranks, started without mpirun, says it runs on one
// rank (and trains, as torchrun --nproc-per-node=1 does); on 2 ranks, or with
// --strategy=single, nothing is said.
TEST(TrainFaults, AParallelStrategyOnOneRankSaysSo) {
  const std::string flags = "--model=logistic --train-limit=256 --epochs=1 --threads=1 ";
  const std::string warning = "train: warning: --strategy=zero2 is running on 1 rank (not started by mpirun)";
  // stderr alone: the warning is there once, and not among the results on stdout.
  const auto alone = tessera::testing::run_command(
      "(" + tessera::testing::train_binaries().train + " " + flags + "--strategy=zero2 2>&1 >/dev/null)");
  EXPECT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_EQ(count(alone.output, warning), 1u) << alone.output;
  EXPECT_NE(alone.output.find("mpirun -np N bazel-bin/tools/train"), std::string::npos) << alone.output;
  const auto one_by_mpirun = tessera::testing::run_train(flags + "--strategy=ddp", 1);
  EXPECT_EQ(one_by_mpirun.exit_code, 0) << one_by_mpirun.output;
  EXPECT_EQ(count(one_by_mpirun.output, "train: warning: --strategy=ddp is running on 1 rank (the "
                                        "one rank mpirun or srun started)"), 1u)
      << one_by_mpirun.output;
  const auto two = tessera::testing::run_train(flags + "--strategy=zero2", 2);
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(two.output.find("warning: --strategy"), std::string::npos) << two.output;
  const auto single = tessera::testing::run_train_single(flags);
  EXPECT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(single.output.find("warning: --strategy"), std::string::npos) << single.output;
}

// Ranks started with different flags (an MPMD launch) stop at start-up, every rank told which
// setting differs and its value on each rank, instead of training to a wrong result.
TEST(TrainFaults, RanksWithDifferentFlagsAreToldWhichAndStop) {
  const std::string common = "--model=logistic --train-limit=1000 --epochs=1 --threads=1 --strategy=ddp ";
  const tessera::testing::TrainBinaries& b = tessera::testing::train_binaries();
  const auto r = tessera::testing::run_command(b.runner + " 1 " + b.train + " " + common +
                                               "--batch-size=64 : -np 1 " + b.train + " " +
                                               common + "--batch-size=32");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ranks disagree on \"batch-size\": 64 on rank 0; 32 on rank 1"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << r.output;  // before any training
}

// The NaN guard on 2 ranks: every rank stops at the same batch, the job exits non-zero.
TEST(TrainFaults, ADivergingRunStopsEveryRank) {
  const auto r = tessera::testing::run_train(
      "--model=logistic --optimizer=sgd --lr=1e38 --train-limit=1000 --epochs=2 --threads=1 "
      "--strategy=ddp", 2);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the training loss is not finite"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at epoch 1, batch 2 of"), std::string::npos) << r.output;
}

// The gradient-norm check on 2 ranks, in the loss check's one all-reduce: DDP's averaged
// gradients overflow on both ranks, and both stop at the same batch before stepping.
TEST(TrainFaults, ANonFiniteGradientNormStopsEveryRank) {
  const std::string dir = tessera::testing::temp_path("grad_guard_ddp");
  const std::string flags = "--model=mlp --optimizer=sgd --train-limit=500 --threads=1 ";
  ASSERT_EQ(tessera::testing::run_train_single(flags + "--epochs=1 --checkpoint-dir=" + dir).exit_code,
            0);
  // The epoch's checkpoint (500 images in batches of 64: 7 steps), rewritten without hashes.
  tessera::testing::make_gradients_overflow(dir + "/step-00000007/checkpoint.safetensors");
  const auto r = tessera::testing::run_train(flags + "--epochs=2 --strategy=ddp --resume=" + dir, 2);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the training gradient norm is not finite (inf on this rank) at epoch "
                          "2, batch 1 of 3"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("the training loss is not finite"), std::string::npos) << r.output;
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
