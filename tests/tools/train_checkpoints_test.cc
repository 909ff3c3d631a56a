// The train tool's checkpoints as a set (issue 49): each save in a new DIR/step-N/, committed by
// its last file, every tensor hashed.
//   - a rank killed inside the second epoch's sharded save (before rank 0's index; in the middle
//     of a shard's write) leaves epoch 1's checkpoint committed and the new one uncommitted; the
//     resume takes epoch 1's, cleans the leftover and ends as the uninterrupted run, bit for bit;
//   - --resume=DIR takes the newest committed checkpoint, not a stale last.safetensors of the
//     layout before; a file of that layout without hashes still loads, and says so;
//   - a flipped bit in the newest checkpoint: --resume=DIR says so and takes the one before;
//     --resume naming that checkpoint itself exits 1 naming the file and the tensor.
// 2 ranks, the MLP on 1000 images (7 steps an epoch), one thread each.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tensor/safetensors.h"
#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_number;
using tessera::testing::last_json_line;
using tessera::testing::run_command;
using tessera::testing::run_train;
using tessera::testing::run_train_single;
using tessera::testing::temp_path;

const std::string kZero = "--model=mlp --train-limit=1000 --threads=1 --seed=3 --strategy=zero2 "
                          "--checkpoint-format=sharded ";
const std::string kSingle = "--model=mlp --train-limit=1000 --threads=1 --seed=3 ";

std::string fresh_dir(const std::string& name) {
  const std::string dir = temp_path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

void flip_bit(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  char byte;
  f.seekg(static_cast<std::streamoff>(at));
  f.read(&byte, 1);
  byte ^= 0x20;
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&byte, 1);
}

// A bit in the middle of tensor `name` of `path` flipped.
void corrupt_tensor(const std::string& path, const std::string& name) {
  const tessera::SafetensorsHeader h = tessera::read_safetensors_header(path);
  const tessera::SafetensorsHeader::Entry* e = h.find(name);
  ASSERT_NE(e, nullptr) << path << " " << name;
  flip_bit(path, h.data_start + (e->begin + e->end) / 2);
}

// Killed in epoch 2's save at `fault`, then resumed: epoch 1's checkpoint (step 7) is the one
// resumed from, and the run ends where the uninterrupted one does.
void killed_in_save_resumes_from_epoch_1(const std::string& name, const std::string& fault) {
  const std::string whole_dir = fresh_dir(name + "_whole"), dir = fresh_dir(name);
  const auto whole = run_train(kZero + "--epochs=2 --checkpoint-dir=" + whole_dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const auto killed = run_train(kZero + "--epochs=2 --checkpoint-dir=" + dir + " --inject-fault=" + fault);
  EXPECT_NE(killed.exit_code, 0) << killed.output;
  EXPECT_NE(killed.output.find("--inject-fault: crashing in a checkpoint save"), std::string::npos)
      << killed.output;
  EXPECT_TRUE(exists(dir + "/step-00000007/index.safetensors")) << killed.output;
  EXPECT_TRUE(exists(dir + "/step-00000014")) << killed.output;  // begun,
  EXPECT_FALSE(exists(dir + "/step-00000014/index.safetensors")) << killed.output;  // not committed

  const auto resumed = run_train(kZero + "--epochs=2 --checkpoint-dir=" + dir + " --resume=" + dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + dir + "/step-00000007 after epoch 1"),
            std::string::npos) << resumed.output;
  EXPECT_EQ(json_number(last_json_line(resumed.output), "train_loss"),
            json_number(last_json_line(whole.output), "train_loss")) << resumed.output;
  EXPECT_TRUE(exists(dir + "/step-00000014/index.safetensors"));  // saved again, committed
  for (const auto& e : std::filesystem::directory_iterator(dir + "/step-00000014")) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left over: " << e.path();
  }
}

TEST(TrainCheckpoints, RankZeroKilledBeforeTheIndexLeavesTheLastCheckpoint) {
  killed_in_save_resumes_from_epoch_1("killed_before_index", "crash-in-save:0:8:before-index");
}

TEST(TrainCheckpoints, ARankKilledWritingItsShardLeavesTheLastCheckpoint) {
  killed_in_save_resumes_from_epoch_1("killed_mid_shard", "crash-in-save:1:8:mid-shard");
}

// Saves go to new directories; the two newest committed ones stay.
TEST(TrainCheckpoints, TheTwoNewestCommittedCheckpointsAreKept) {
  const std::string dir = fresh_dir("kept");
  const auto r = run_train_single(kSingle + "--epochs=3 --checkpoint-dir=" + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(exists(dir + "/step-00000015"));
  EXPECT_TRUE(exists(dir + "/step-00000030/checkpoint.safetensors"));
  EXPECT_TRUE(exists(dir + "/step-00000045/checkpoint.safetensors"));
  EXPECT_FALSE(exists(dir + "/last.safetensors"));
}

// A stale DIR/last.safetensors (the layout before, epoch 1) beside a newer committed checkpoint
// (epoch 2): the newer one is resumed from. Alone, the old file is read, with a note that it
// carries no hashes.
TEST(TrainCheckpoints, ResumeTakesTheNewestCommittedCheckpointNotAStaleLastSafetensors) {
  const std::string dir = fresh_dir("stale");
  ASSERT_EQ(run_train_single(kSingle + "--epochs=1 --checkpoint-dir=" + dir).exit_code, 0);
  {
    // The epoch-1 checkpoint as an earlier tessera wrote it: DIR/last.safetensors, no hashes.
    const tessera::SafetensorsFile f =
        tessera::load_safetensors(dir + "/step-00000015/checkpoint.safetensors");
    tessera::save_safetensors(dir + "/last.safetensors", f.tensors, f.metadata);
  }
  const auto second =
      run_train_single(kSingle + "--epochs=2 --resume=" + dir + " --checkpoint-dir=" + dir);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from " + dir + "/step-00000015/checkpoint.safetensors "
                               "after epoch 1"), std::string::npos) << second.output;
  // last.safetensors is newer on disk than step-00000015 but older than step-00000030.
  const auto third = run_train_single(kSingle + "--epochs=3 --resume=" + dir);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("resumed from " + dir + "/step-00000030/checkpoint.safetensors "
                              "after epoch 2"), std::string::npos) << third.output;
  // The old layout alone: read, and said to be unchecked.
  const std::string old_dir = fresh_dir("stale_alone");
  std::filesystem::create_directories(old_dir);
  std::filesystem::copy_file(dir + "/last.safetensors", old_dir + "/last.safetensors");
  const auto legacy = run_train_single(kSingle + "--epochs=2 --resume=" + old_dir);
  ASSERT_EQ(legacy.exit_code, 0) << legacy.output;
  EXPECT_NE(legacy.output.find(old_dir + "/last.safetensors carries no content hashes"),
            std::string::npos) << legacy.output;
  EXPECT_NE(legacy.output.find("resumed from " + old_dir + "/last.safetensors after epoch 1"),
            std::string::npos) << legacy.output;
}

// A flipped bit in a shard of the newest sharded checkpoint (epoch 2): --resume=DIR passes over
// it, saying which file and tensor failed, and resumes from epoch 1's on both ranks; named
// itself, it is an error (exit 1) naming them.
TEST(TrainCheckpoints, ACorruptNewestCheckpointFallsBackToTheOneBefore) {
  const std::string dir = fresh_dir("corrupt_newest");
  ASSERT_EQ(run_train(kZero + "--epochs=2 --checkpoint-dir=" + dir).exit_code, 0);
  const std::string shard = dir + "/step-00000014/shard-00002-of-00002.safetensors";
  corrupt_tensor(shard, "vector.0.state.exp_avg");
  const auto r = run_train(kZero + "--epochs=3 --resume=" + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("train: " + dir + "/step-00000014 fails verification, passed over: "
                          "load_safetensors: '" + shard + "': tensor 'vector.0.state.exp_avg'"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resumed from " + dir + "/step-00000007 after epoch 1"),
            std::string::npos) << r.output;
  const auto named = run_train(kZero + "--epochs=3 --resume=" + dir + "/step-00000014");
  EXPECT_EQ(named.exit_code, 1) << named.output;
  EXPECT_NE(named.output.find("--resume=" + dir + "/step-00000014 fails verification: "
                              "load_safetensors: '" + shard + "': tensor 'vector.0.state.exp_avg'"),
            std::string::npos) << named.output;
  // A full checkpoint's file, named: the same.
  const std::string full_dir = fresh_dir("corrupt_full");
  ASSERT_EQ(run_train_single(kSingle + "--epochs=1 --checkpoint-dir=" + full_dir).exit_code, 0);
  const std::string file = full_dir + "/step-00000015/checkpoint.safetensors";
  corrupt_tensor(file, "model.fc1.weight");
  const auto full = run_train_single(kSingle + "--epochs=2 --resume=" + file);
  EXPECT_EQ(full.exit_code, 1) << full.output;
  EXPECT_NE(full.output.find("'" + file + "': tensor 'model.fc1.weight'"), std::string::npos)
      << full.output;
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
