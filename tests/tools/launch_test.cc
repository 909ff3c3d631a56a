// The elastic launcher (tools/launch) over the train tool under mpirun, on 2 and 3 ranks:
//   - a rank killed at step 20 (epoch 2 of 2) under --max-restarts=1: the job restarts from the
//     epoch-1 checkpoint (DIR/step-00000015/) and ends with the uninterrupted run's checkpoint,
//     byte for byte, and "restarts": 1 in the JSON;
//   - the same for ZeRO-2 with sharded checkpoints, file for file;
//   - the newest checkpoint corrupted between the attempts: the restart passes over it and
//     resumes from the one before;
//   - a stalled rank ends the job through --collective-timeout, and the restart finishes;
//   - a lost slot (the hostfile shrinks from 3 to 2 before the restart) with --min-ranks=2:
//     the run resumes on 2 ranks and ends within 0.5 points of the uninterrupted 3-rank run;
//   - a rank killed, and an error on every rank: one line names the rank and the signal, the
//     error is printed once, and Open MPI's own messages are taken out;
//   - no restarts left, too few slots, bad flags (before any rank starts) and a usage error
//     end the job with the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/util/test_util.h"

namespace {

using tessera::testing::CommandResult;
using tessera::testing::json_number;
using tessera::testing::last_json_line;
using tessera::testing::run_command;
using tessera::testing::temp_path;

std::string launch_binary, train_binary;

const std::string kMpirun = "mpirun --oversubscribe --allow-run-as-root --bind-to none";
const std::string kMlp = "--model=mlp --threads=1 --seed=3 --strategy=ddp ";

std::string fresh_dir(const std::string& name) {
  const std::string dir = temp_path(name);
  run_command("rm -rf " + dir);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// mpirun -np RANKS [HOSTFILE] train FLAGS, directly or under the launcher with LAUNCH_FLAGS.
std::string job(int ranks, const std::string& flags, const std::string& hostfile = "") {
  return kMpirun + " -np " + std::to_string(ranks) +
         (hostfile.empty() ? "" : " --hostfile " + hostfile) + " " + train_binary + " " + flags;
}
CommandResult launch(const std::string& launch_flags, const std::string& job_command) {
  return run_command(launch_binary + " " + launch_flags + " -- " + job_command);
}

TEST(Launch, ACrashedRankRestartsFromTheCheckpointAndEndsAsTheUninterruptedRun) {
  const std::string flags = kMlp + "--train-limit=2000 --epochs=2 ";
  const std::string a = fresh_dir("launch_a"), b = fresh_dir("launch_b");
  const CommandResult whole = run_command(job(2, flags + "--checkpoint-dir=" + a));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  // 1000 images per rank in batches of 64: 15 steps an epoch; step 20 is in epoch 2.
  const CommandResult r =
      launch("--max-restarts=1", job(2, flags + "--checkpoint-dir=" + b + " --inject-fault=crash:1:20"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 1] --inject-fault: crashing at step 20"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launch: attempt 1 ended after "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": rank 1 was killed by SIGKILL (signal 9)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launch: attempt 2 on 2 ranks, resuming from " + b), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resumed from " + b + "/step-00000015/checkpoint.safetensors after epoch 1"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("launch: finished after 1 restart"), std::string::npos) << r.output;
  const std::string s = last_json_line(r.output);
  EXPECT_EQ(json_number(s, "restarts"), 1) << s;
  EXPECT_EQ(json_number(s, "train_loss"), json_number(last_json_line(whole.output), "train_loss"));
  const std::string want = read_file(a + "/step-00000030/checkpoint.safetensors");
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(read_file(b + "/step-00000030/checkpoint.safetensors") == want)
      << "the checkpoints differ";
}

// The same with ZeRO-2's sharded checkpoints (each rank its shard of Adam's state): the restart
// reads step-00000015/, and every tensor of every file of the last one ends as the
// uninterrupted run's (all but "id", the random identity each save gives its index and shards
// to match them, and "file_crc32", the shards' header hashes, which hold that id).
TEST(Launch, AZeroRunRestartsFromItsShardedCheckpoint) {
  const std::string flags = "--model=mlp --threads=1 --seed=3 --strategy=zero2 "
                            "--checkpoint-format=sharded --train-limit=2000 --epochs=2 ";
  const std::string a = fresh_dir("launch_zero_a"), b = fresh_dir("launch_zero_b");
  const CommandResult whole = run_command(job(2, flags + "--checkpoint-dir=" + a));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const CommandResult r =
      launch("--max-restarts=1", job(2, flags + "--checkpoint-dir=" + b + " --inject-fault=crash:0:20"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + b + "/step-00000015 after epoch 1"), std::string::npos)
      << r.output;
  EXPECT_EQ(json_number(last_json_line(r.output), "restarts"), 1) << r.output;
  const CommandResult files = run_command("cd " + a + "/step-00000030 && ls");
  ASSERT_FALSE(files.output.empty());
  std::istringstream names(files.output);
  int compared = 0;
  for (std::string name; names >> name; ++compared) {
    const tessera::SafetensorsFile want = tessera::load_safetensors(a + "/step-00000030/" + name);
    const tessera::SafetensorsFile got = tessera::load_safetensors(b + "/step-00000030/" + name);
    ASSERT_EQ(got.tensors.size(), want.tensors.size()) << name;
    for (const auto& [key, t] : want.tensors) {
      if (key == "id" || key == "file_crc32") continue;
      EXPECT_EQ(tessera::max_abs_diff(got.tensors.at(key).to(tessera::kF64),
                                      t.to(tessera::kF64)), 0.0) << name << " " << key;
    }
  }
  EXPECT_GE(compared, 3) << files.output;  // an index and a shard per rank
}

// Rank 1 killed in epoch 3, and the newest checkpoint (epoch 2's) corrupted before the restart
// (a byte in the middle of its data overwritten, by --before-restart): the train tool passes
// over it, naming the file and tensor, and resumes from epoch 1's; the job finishes.
TEST(Launch, ARestartPassesOverACorruptNewestCheckpoint) {
  const std::string dir = fresh_dir("launch_corrupt");
  const std::string newest = dir + "/step-00000030/checkpoint.safetensors";
  const CommandResult r = launch(
      "--max-restarts=1 --before-restart='printf U | dd of=" + newest +
          " bs=1 seek=1200000 conv=notrunc status=none'",
      job(2, kMlp + "--train-limit=2000 --epochs=3 --checkpoint-dir=" + dir +
                 " --inject-fault=crash:1:35"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train: " + newest + " fails verification, passed over: "
                          "load_safetensors: '" + newest + "': tensor '"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + dir + "/step-00000015/checkpoint.safetensors after "
                          "epoch 1"), std::string::npos) << r.output;
  EXPECT_EQ(json_number(last_json_line(r.output), "restarts"), 1) << r.output;
}

TEST(Launch, AStalledRankTimesOutAndTheRestartFinishes) {
  const std::string dir = fresh_dir("launch_stall");
  const CommandResult r = launch(
      "--max-restarts=1", job(2, kMlp + "--train-limit=2000 --epochs=2 --checkpoint-dir=" + dir +
                                     " --inject-fault=stall:0:20 --collective-timeout=3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("error: collective timeout"), std::string::npos) << r.output;
  EXPECT_EQ(json_number(last_json_line(r.output), "restarts"), 1) << r.output;
}

TEST(Launch, ALostSlotResumesOnFewerRanks) {
  const std::string flags = kMlp + "--train-limit=6000 --epochs=3 ";
  const std::string whole_dir = fresh_dir("launch_whole3"), dir = fresh_dir("launch_fewer");
  const CommandResult whole = run_command(job(3, flags + "--checkpoint-dir=" + whole_dir));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string hosts = temp_path("launch_fewer_hosts");
  { std::ofstream(hosts) << "localhost slots=3\n"; }
  // 2000 images per rank: 31 steps an epoch; the crash at step 40 is in epoch 2. The health
  // check between attempts finds one slot gone.
  const CommandResult r = launch(
      "--max-restarts=1 --min-ranks=2 --before-restart='sed -i s/slots=3/slots=2/ " + hosts + "'",
      job(3, flags + "--checkpoint-dir=" + dir + " --inject-fault=crash:2:40", hosts));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("launch: attempt 2 on 2 ranks, resuming from " + dir), std::string::npos)
      << r.output;
  const std::string s = last_json_line(r.output);
  EXPECT_EQ(json_number(s, "world_size"), 2) << s;
  EXPECT_EQ(json_number(s, "restarts"), 1) << s;
  EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(last_json_line(whole.output), "test_accuracy"),
              0.005) << s;
}

// How often `part` occurs in `text`.
size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// What the user reads of a failed job: the ranks' own lines, once, and one line of the
// launcher's naming the rank and how it ended, without Open MPI's messages (which plain
// mpirun shows: the independent reference that they were there to take out).
TEST(Launch, SaysWhichRankEndedTheJobAndHowWithoutMpirunsMessages) {
  const std::string flags = "--model=logistic --train-limit=1000 --epochs=1 --threads=1 "
                            "--strategy=ddp ";
  const std::string killed = job(3, flags + "--checkpoint-dir=" + fresh_dir("launch_killed") +
                                        " --inject-fault=crash:2:3");
  const CommandResult plain = run_command(killed);
  EXPECT_NE(plain.output.find("mpirun noticed that process rank 2"), std::string::npos) << plain.output;
  const CommandResult r = launch("--max-restarts=0", killed);
  EXPECT_EQ(r.exit_code, 137) << r.output;
  EXPECT_EQ(count(r.output, "[rank 2] --inject-fault: crashing at step 3"), 1u) << r.output;
  EXPECT_NE(r.output.find(": rank 2 was killed by SIGKILL (signal 9): out of memory (the kernel's "
                          "OOM killer), a scheduler, or kill -9 (the job's exit code 137)"),
            std::string::npos) << r.output;
  for (const char* noise : {"----------", "mpirun noticed", "Primary job", "ORTE_ERROR_LOG",
                            "help message", "MPI_ABORT"}) {
    EXPECT_EQ(r.output.find(noise), std::string::npos) << noise << "\n" << r.output;
  }
  // An error every rank meets: printed once, by rank 0, and named so.
  const CommandResult all = launch(
      "--max-restarts=0", job(3, flags + "--checkpoint-dir=" + fresh_dir("launch_all") +
                                     " --data-dir=/nonexistent"));
  EXPECT_EQ(all.exit_code, 1) << all.output;
  EXPECT_EQ(count(all.output, "error: "), 1u) << all.output;
  EXPECT_EQ(count(all.output, "[rank 0] error: data/mnist.cc"), 1u) << all.output;
  EXPECT_NE(all.output.find("ended after"), std::string::npos) << all.output;
  EXPECT_EQ(all.output.find("----------"), std::string::npos) << all.output;
  const bool named = all.output.find(": rank 0 called MPI_Abort (error code 1)") != std::string::npos ||
                     all.output.find(": rank 0 failed: its error is above") != std::string::npos;
  EXPECT_TRUE(named) << all.output;
}

TEST(Launch, EndsWithTheReasonWhenItCannotGoOn) {
  const std::string dir = fresh_dir("launch_end");
  const std::string flags = kMlp + "--train-limit=2000 --epochs=1 --checkpoint-dir=" + dir;
  const CommandResult none = launch("--max-restarts=0", job(2, flags + " --inject-fault=crash:1:3"));
  EXPECT_NE(none.exit_code, 0) << none.output;
  EXPECT_NE(none.output.find("launch: no restarts left (--max-restarts=0)"), std::string::npos)
      << none.output;
  const std::string hosts = temp_path("launch_end_hosts");
  { std::ofstream(hosts) << "localhost slots=1\n"; }
  const CommandResult few = launch("", job(2, flags, hosts));
  EXPECT_EQ(few.exit_code, 1) << few.output;
  EXPECT_NE(few.output.find("offers 1 slot, fewer than --min-ranks=2"), std::string::npos)
      << few.output;
  // Bad flags: the launcher reads them as the train tool does and starts nothing.
  const CommandResult bad = launch("--max-restarts=3", job(2, flags + " --epochs=0"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("launch: the train tool's flags: --epochs expects an integer >= 1, "
                            "got '0'"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("launch: attempt 1"), std::string::npos) << bad.output;
  // A usage error only the run finds (its data makes no batch): exit 2, not retried.
  const CommandResult usage = launch(
      "--max-restarts=3", job(2, kMlp + "--train-limit=1 --epochs=1 --checkpoint-dir=" + dir));
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
  EXPECT_NE(usage.output.find("exit code 2 is a usage error; not restarting"), std::string::npos)
      << usage.output;
  const CommandResult no_dir = launch("", job(2, kMlp));
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.output;
  EXPECT_NE(no_dir.output.find("launch: a restart by tools/launch with no --checkpoint-dir: "),
            std::string::npos) << no_dir.output;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LAUNCH TRAIN\n", argv[0]);
    return 2;
  }
  launch_binary = argv[1];
  train_binary = argv[2];
  // As tools/mpi_run.sh: shared memory on one machine, no ptrace copies, oversubscribed,
  // waiting ranks yielding their core.
  ::setenv("OMPI_MCA_btl", "self,vader", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  ::unsetenv("TEST_PREMATURE_EXIT_FILE");
  ::unsetenv("XML_OUTPUT_FILE");
  return RUN_ALL_TESTS();
}
