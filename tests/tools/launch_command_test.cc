// The elastic launcher's command rewriting and hostfile reading, alone: each attempt gets the
// rank count it is given (in the flag's own form), -x TESSERA_RESTART_COUNT for mpirun, and
// --resume=DIR when asked; commands it cannot restart are refused naming what is missing.
#include "tools/launch/command.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/util/expect_error.h"
#include "tests/util/test_util.h"
#include "tools/launch/hostfile.h"

namespace tessera {
namespace launch {
namespace {

using testing::expect_error;
using Args = std::vector<std::string>;

TEST(LaunchCommand, RewritesTheRankCountAddsTheAttemptAndResume) {
  const LaunchCommand c(Args{"/usr/bin/mpirun", "-np", "4", "--hostfile", "hosts", "train",
                             "--model=mlp", "--checkpoint-dir=ck"});
  EXPECT_EQ(c.ranks(), 4);
  EXPECT_TRUE(c.is_mpirun());
  EXPECT_EQ(c.checkpoint_dir(), "ck");
  ASSERT_TRUE(c.hostfile().has_value());
  EXPECT_EQ(*c.hostfile(), "hosts");
  EXPECT_EQ(c.for_attempt(4, false),
            (Args{"/usr/bin/mpirun", "-x", "TESSERA_RESTART_COUNT", "-np", "4", "--hostfile",
                  "hosts", "train", "--model=mlp", "--checkpoint-dir=ck"}));
  EXPECT_EQ(c.for_attempt(3, true),
            (Args{"/usr/bin/mpirun", "-x", "TESSERA_RESTART_COUNT", "-np", "3", "--hostfile",
                  "hosts", "train", "--model=mlp", "--checkpoint-dir=ck", "--resume=ck"}));
}

TEST(LaunchCommand, SrunAndTheJoinedForms) {
  const LaunchCommand s(Args{"srun", "--ntasks=8", "--mpi=pmix", "train", "--checkpoint-dir=/c"});
  EXPECT_EQ(s.ranks(), 8);
  EXPECT_FALSE(s.is_mpirun());
  EXPECT_FALSE(s.hostfile().has_value());
  // srun passes the environment on by itself: no -x.
  EXPECT_EQ(s.for_attempt(6, true),
            (Args{"srun", "--ntasks=6", "--mpi=pmix", "train", "--checkpoint-dir=/c", "--resume=/c"}));
  const LaunchCommand m(Args{"mpiexec", "-n", "2", "train", "--checkpoint-dir=d"});
  EXPECT_EQ(m.ranks(), 2);
  EXPECT_EQ(m.for_attempt(1, false)[4], "1");
}

// A restart on fewer slots takes the most ranks the run's layout fits: whole pipelines of
// whole tensor-parallel groups (8 ranks of --stages=2 --tensor-parallel=2 on 7 slots: 4), and a
// worker beside asynchronous SGD's servers.
TEST(LaunchCommand, FewerRanksFitTheStagesAndTensorParallelGroups) {
  const LaunchCommand c(Args{"mpirun", "-np", "8", "train", "--strategy=pipeline", "--stages=2",
                             "--tensor-parallel=2", "--checkpoint-dir=d"});
  EXPECT_EQ(c.fitting_ranks(8), 8);
  EXPECT_EQ(c.fitting_ranks(7), 4);
  EXPECT_EQ(c.fitting_ranks(3), 0);
  EXPECT_EQ(c.fitting_ranks(20), 8);  // never more than the command's
  EXPECT_EQ(c.fitting_rule(), "a multiple of --stages=2 x --tensor-parallel=2");
  const LaunchCommand plain(Args{"mpirun", "-np", "4", "train", "--checkpoint-dir=d"});
  EXPECT_EQ(plain.fitting_ranks(3), 3);
  EXPECT_EQ(plain.fitting_rule(), "");
  const LaunchCommand async(Args{"mpirun", "-np", "4", "train", "--strategy=async", "--servers=2",
                                 "--checkpoint-dir=d"});
  EXPECT_EQ(async.fitting_ranks(3), 3);
  EXPECT_EQ(async.fitting_ranks(2), 0);
  EXPECT_EQ(async.fitting_rule(), "more than --servers=2");
}

TEST(LaunchCommand, RefusesWhatItCannotRestart) {
  expect_error([] { LaunchCommand(Args{}); }, "no command after --");
  expect_error([] { LaunchCommand(Args{"train", "--checkpoint-dir=d"}); },
               "expected mpirun (or mpiexec, orterun) or srun");
  expect_error([] { LaunchCommand(Args{"mpirun", "train", "--checkpoint-dir=d"}); },
               "gives no rank count (-np N or -n N after mpirun)");
  expect_error([] { LaunchCommand(Args{"mpirun", "-np", "four", "train", "--checkpoint-dir=d"}); },
               "-np four: expected a rank count >= 1");
  // The train tool's flags, checked before any rank starts: the flag checker's message, and
  // the support table's refusals of a restart.
  expect_error([] { LaunchCommand(Args{"mpirun", "-np", "2", "train", "--model=mlp"}); },
               "launch: a restart by tools/launch with no --checkpoint-dir: tools/launch restarts "
               "a job from the newest committed checkpoint in its --checkpoint-dir: give one");
  expect_error(
      [] { LaunchCommand(Args{"mpirun", "-np", "2", "train", "--stratgy=ddp", "--checkpoint-dir=d"}); },
      "launch: the train tool's flags: unknown flag --stratgy; did you mean --strategy?");
  expect_error([] {
    LaunchCommand(Args{"mpirun", "-np", "2", "train", "--strategy=zero1", "--compression=fp16",
                       "--amp=fp16", "--checkpoint-dir=d"});
  }, "launch: the train tool's flags: --strategy=zero1 with --compression=fp16 and --amp=fp16");
  const LaunchCommand single(Args{"mpirun", "-np", "1", "train", "--checkpoint-dir=d"});
  single.check_restart("same-ranks");
  expect_error([&] { single.check_restart("fewer-ranks"); },
               "launch: a restart by tools/launch on fewer ranks with --strategy=single: one "
               "process has no fewer ranks to restart on");
  const LaunchCommand ddp(Args{"mpirun", "-np", "3", "--bind-to", "none", "./train",
                               "--strategy=ddp", "--checkpoint-dir=d"});
  ddp.check_restart("fewer-ranks");
  EXPECT_EQ(ddp.checkpoint_dir(), "d");
  expect_error(
      [] { LaunchCommand(Args{"mpirun", "-np", "2", "train", "--checkpoint-dir=d", "--resume=d"}); },
      "the launcher adds --resume=<checkpoint dir> itself");
}

TEST(Hostfile, CountsSlotsCommentsAndBareNodes) {
  const std::string path = testing::temp_path("launch_hosts");
  {
    std::ofstream f(path);
    f << "# two nodes and a bare one\nnode1 slots=4 max_slots=8\n\nnode2 slots=2  # half\nnode3\n";
  }
  EXPECT_EQ(hostfile_slots(path), 7);
  {
    std::ofstream f(path);
    f << "node1 slots=x\n";
  }
  expect_error([&] { hostfile_slots(path); }, "line 1: 'slots=x' is not slots=COUNT");
  expect_error([] { hostfile_slots("/nonexistent/hosts"); }, "cannot read the hostfile '/nonexistent/hosts'");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace launch
}  // namespace tessera
