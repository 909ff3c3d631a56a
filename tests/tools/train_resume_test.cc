// Issue 49, "resume equal to the uninterrupted run for every strategy", under mpirun: for each
// strategy, one epoch and then --resume to two ends exactly where two epochs in one run do. The
// final JSON prints the train loss to 6 digits only, so beside it the two runs' last checkpoints
// are compared tensor by tensor, bit for bit: the model, the optimizer's state and the extra
// tensors (every rank's own state), and the metadata (progress, random stream).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dist/checkpoint.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_number;
using tessera::testing::last_json_line;
using tessera::testing::run_train;
using tessera::testing::run_train_single;
using tessera::testing::temp_path;

// The short MLP run at a constant learning rate (the MLP's default schedule is cosine).
const std::string kBase = "--model=mlp --train-limit=2000 --threads=1 --seed=3 --schedule=constant ";

// The newest committed checkpoint's file of a run's --checkpoint-dir (full format).
std::string newest_checkpoint(const std::string& dir) {
  const auto committed = tessera::committed_checkpoints(dir);
  return committed.empty() ? dir + " (no committed checkpoint)" : committed.front().path;
}

// Every tensor of `a` is in `b` with the same dtype, shape and bytes, and the other way round.
void expect_same_tensors(const tessera::StateDict& a, const tessera::StateDict& b,
                         const std::string& what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) {
    const tessera::Tensor* u = b.find(name);
    if (u == nullptr) {
      ADD_FAILURE() << what << ": '" << name << "' only in the uninterrupted run's checkpoint";
      continue;
    }
    ASSERT_EQ(t.dtype(), u->dtype()) << what << " " << name;
    ASSERT_EQ(t.shape(), u->shape()) << what << " " << name;
    const tessera::Tensor x = t.contiguous(), y = u->contiguous();
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0)
        << what << ": '" << name << "' differs";
  }
  for (const auto& [name, t] : b) {
    EXPECT_TRUE(a.contains(name)) << what << ": '" << name << "' only in the resumed checkpoint";
  }
}

struct Runs {
  std::string straight, resumed;  // the final JSON lines
  std::string resumed_output;
};

// `flags` for 2 epochs in one run, and for 1 epoch then --resume to 2, each with its own
// --checkpoint-dir: the train loss and the last checkpoints are equal, bit for bit.
Runs expect_resume_equals_uninterrupted(const std::string& name, const std::string& flags,
                                        int ranks = 2) {
  const std::string whole_dir = temp_path("resume_" + name + "_whole");
  const std::string split_dir = temp_path("resume_" + name + "_split");
  Runs runs;
  const auto whole = run_train(flags + " --epochs=2 --checkpoint-dir=" + whole_dir, ranks);
  EXPECT_EQ(whole.exit_code, 0) << whole.output;
  const auto first = run_train(flags + " --epochs=1 --checkpoint-dir=" + split_dir, ranks);
  EXPECT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = run_train(
      flags + " --epochs=2 --checkpoint-dir=" + split_dir + " --resume=" + split_dir, ranks);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  runs.straight = last_json_line(whole.output);
  runs.resumed = last_json_line(resumed.output);
  runs.resumed_output = resumed.output;
  if (whole.exit_code != 0 || first.exit_code != 0 || resumed.exit_code != 0) return runs;
  EXPECT_NE(resumed.output.find("resumed from " + split_dir), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("starts fresh"), std::string::npos) << resumed.output;
  EXPECT_EQ(resumed.output.find("start from"), std::string::npos) << resumed.output;
  EXPECT_EQ(json_number(runs.straight, "train_loss"), json_number(runs.resumed, "train_loss"))
      << name << "\n" << runs.straight << "\n" << runs.resumed;
  EXPECT_EQ(json_number(runs.straight, "test_accuracy"), json_number(runs.resumed, "test_accuracy"))
      << name;
  const tessera::SafetensorsFile a = tessera::load_safetensors(newest_checkpoint(whole_dir));
  const tessera::SafetensorsFile b = tessera::load_safetensors(newest_checkpoint(split_dir));
  expect_same_tensors(a.tensors, b.tensors, name);
  EXPECT_EQ(a.metadata, b.metadata) << name;
  return runs;
}

// The optimizer's state of a ZeRO-3 full checkpoint is gathered from the units' shards into the
// unsplit model's format (without it the resumed run ended at train loss 0.5647 instead of
// 0.5296).
TEST(TrainResume, Zero3FullCheckpointResumesExactly) {
  expect_resume_equals_uninterrupted("zero3", kBase + "--strategy=zero3");
}

// A ZeRO-3 full checkpoint's optimizer state has DDP's format (the same keys and shapes, values
// to float rounding: the two average gradients in different orders), and the optimizer moves
// with it: DDP resumes from ZeRO-3's checkpoint and ZeRO-3 from DDP's, each ending where its own
// uninterrupted run does to rounding; one process and ZeRO-3 on another world size read it too.
TEST(TrainResume, Zero3FullCheckpointsMoveTheOptimizerToAndFromDdp) {
  const std::string ddp_dir = temp_path("resume_cross_ddp"), zero3_dir = temp_path("resume_cross_zero3");
  const auto ddp = run_train(kBase + "--strategy=ddp --epochs=1 --checkpoint-dir=" + ddp_dir);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto zero3 = run_train(kBase + "--strategy=zero3 --epochs=1 --checkpoint-dir=" + zero3_dir);
  ASSERT_EQ(zero3.exit_code, 0) << zero3.output;
  const tessera::StateDict a = tessera::load_safetensors(newest_checkpoint(ddp_dir)).tensors;
  const tessera::StateDict b = tessera::load_safetensors(newest_checkpoint(zero3_dir)).tensors;
  EXPECT_EQ(a.size(), b.size());
  int optimizer_tensors = 0;
  for (const auto& [name, t] : a) {
    const tessera::Tensor* u = b.find(name);
    ASSERT_NE(u, nullptr) << name << " is not in ZeRO-3's checkpoint";
    ASSERT_EQ(t.shape(), u->shape()) << name;
    EXPECT_TRUE(tessera::allclose(t.to(tessera::kF64), u->to(tessera::kF64), 1e-3, 1e-6)) << name;
    optimizer_tensors += name.rfind("optimizer.state.", 0) == 0;
  }
  EXPECT_EQ(optimizer_tensors, 4 * 3);  // Adam: step, exp_avg, exp_avg_sq of 4 parameters

  for (const char* c : {"ddp", "zero3"}) {
    const std::string strategy = c, from = strategy == "ddp" ? zero3_dir : ddp_dir;
    const auto straight = run_train(kBase + "--strategy=" + strategy + " --epochs=2");
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    const auto resumed = run_train(kBase + "--strategy=" + strategy + " --epochs=2 --resume=" + from);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(resumed.output.find("starts fresh"), std::string::npos) << resumed.output;
    EXPECT_NEAR(json_number(last_json_line(straight.output), "train_loss"),
                json_number(last_json_line(resumed.output), "train_loss"), 1e-4) << strategy;
  }
  const auto single = run_train_single(kBase + "--epochs=2 --resume=" + zero3_dir);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(single.output.find("starts fresh"), std::string::npos) << single.output;
  const auto three = run_train(kBase + "--strategy=zero3 --epochs=2 --resume=" + zero3_dir, 3);
  ASSERT_EQ(three.exit_code, 0) << three.output;
  EXPECT_EQ(three.output.find("starts fresh"), std::string::npos) << three.output;
}

// Each tensor-parallel rank's compression state is its own (its slices' residuals): every world
// rank gets its own back (rank 1 of a tensor-parallel pair used to load rank 0's). The lossy
// compressors are refused with tensor parallelism (the support table: the parameters the group
// holds whole would drift apart), so fp16 with error feedback keeps a residual here.
TEST(TrainResume, CompressionUnderTensorParallelismResumesExactly) {
  expect_resume_equals_uninterrupted(
      "tp_fp16_ef", kBase + "--strategy=ddp --tensor-parallel=2 --compression=fp16 --error-feedback=true", 4);
}

// Local SGD and gossip: every rank trains its own model. The checkpoint's model is their average
// (evaluation's) and each rank's own model and optimizer state are its extra tensors, so a resume
// in the middle of a round (16 steps per epoch: H = 5 ends epoch 1 one step into a round; gossip
// never ends one) continues exactly; so do DiLoCo's outer optimizer and global copy. Before,
// every rank resumed from the average and rank 0's optimizer state: local SGD H = 4 ended at
// 0.55449 instead of 0.54803, gossip at 0.55109 instead of 0.54578.
TEST(TrainResume, LocalSgdAndGossipResumeEveryRanksOwnModelExactly) {
  expect_resume_equals_uninterrupted("local_sgd_4", kBase + "--strategy=local-sgd --sync-period=4");
  expect_resume_equals_uninterrupted("local_sgd_5", kBase + "--strategy=local-sgd --sync-period=5");
  expect_resume_equals_uninterrupted(
      "diloco", kBase + "--strategy=local-sgd --sync-period=5 --outer-optimizer=nesterov");
  expect_resume_equals_uninterrupted("gossip", kBase + "--strategy=gossip");
}

// On another world size the ranks' own states cannot be handed out: every rank starts from the
// average model and rank 0's optimizer state, and the run says so.
TEST(TrainResume, LocalSgdOnAnotherWorldSizeStartsFromTheAverage) {
  const std::string dir = temp_path("resume_local_sgd_other_size");
  const std::string flags = kBase + "--strategy=local-sgd --sync-period=5 ";
  const auto first = run_train(flags + "--epochs=1 --checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = run_train(flags + "--epochs=2 --resume=" + dir, 3);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("every rank's own model and optimizer state start from the "
                                "checkpoint's average model and rank 0's optimizer state (it "
                                "holds each rank's own for 2 ranks, this run has 3)"),
            std::string::npos) << resumed.output;
}

// Asynchronous SGD with bound 0 is synchronous SGD, deterministic (a round's pushes applied in
// worker order): its resume ends bit for bit where the uninterrupted run does, with one server
// and Adam, and with two servers (their optimizer states laid end to end) and momentum. The
// checkpoint: the servers' shards gathered (the model), their optimizer states in the unsplit
// model's format and the workers' clocks ("extra.async.clocks"). Before, --checkpoint-dir was
// refused under --strategy=async.
TEST(TrainResume, AsyncWithBoundZeroResumesExactly) {
  const std::string async = kBase + "--strategy=async --staleness-bound=0 ";
  expect_resume_equals_uninterrupted("async_b0", async, 3);
  expect_resume_equals_uninterrupted(
      "async_b0_two_servers", async + "--servers=2 --optimizer=sgd --momentum=0.9", 3);
}

// An asynchronous run's checkpoint has DDP's model and optimizer format (the same keys and
// shapes: the servers' step count is theirs, one a push), so one process resumes it with its
// optimizer state, and asynchronous SGD resumes DDP's (its clocks starting at 0).
TEST(TrainResume, AsyncCheckpointsMoveTheOptimizerToAndFromDdp) {
  const std::string ddp_dir = temp_path("resume_async_cross_ddp");
  const std::string async_dir = temp_path("resume_async_cross_async");
  const std::string async = kBase + "--strategy=async --staleness-bound=0 ";
  const auto ddp = run_train(kBase + "--strategy=ddp --epochs=1 --checkpoint-dir=" + ddp_dir);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const auto first = run_train(async + "--epochs=1 --checkpoint-dir=" + async_dir, 3);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const tessera::StateDict a = tessera::load_safetensors(newest_checkpoint(ddp_dir)).tensors;
  const tessera::StateDict b = tessera::load_safetensors(newest_checkpoint(async_dir)).tensors;
  int compared = 0;
  for (const auto& [name, t] : b) {
    if (name.rfind("extra.", 0) == 0) continue;
    const tessera::Tensor* u = a.find(name);
    ASSERT_NE(u, nullptr) << name << " is not in DDP's checkpoint";
    EXPECT_EQ(t.shape(), u->shape()) << name;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(a.size()));
  const auto single = run_train_single(kBase + "--epochs=2 --resume=" + async_dir);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_EQ(single.output.find("starts fresh"), std::string::npos) << single.output;
  const auto resumed = run_train(async + "--epochs=2 --resume=" + ddp_dir, 3);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("starts fresh"), std::string::npos) << resumed.output;
  EXPECT_LT(json_number(last_json_line(resumed.output), "train_loss"),
            json_number(last_json_line(first.output), "train_loss"));
}

// Each worker's clock (pushes made), from a checkpoint's "extra.async.clocks".
std::vector<double> async_clocks(const std::string& dir) {
  const tessera::StateDict t = tessera::load_safetensors(newest_checkpoint(dir)).tensors;
  const tessera::Tensor* c = t.find("extra.async.clocks");
  if (c == nullptr) return {};
  const tessera::Tensor v = c->to(tessera::kF64).contiguous();
  return std::vector<double>(v.data<double>(), v.data<double>() + v.numel());
}

// Without the bound at 0 the pushes' order is the run's own, so the resumed run is not the
// uninterrupted one: it starts from what was saved (tests/dist/async/parameter_server_test.cc
// checks the servers' state right after loading, bit for bit), its clocks continue from the
// saved ones (an epoch more: twice the pushes; with shared batches twice the pushes in all), and
// it trains on: the second epoch's loss is finite and below the first's.
TEST(TrainResume, AsyncWithoutTheBoundAtZeroResumesFromTheSavedClocksAndTrains) {
  for (const std::string own : {"--staleness-bound=none", "--staleness-bound=2",
                                "--staleness-bound=none --batch-assignment=shared"}) {
    const std::string dir = temp_path("resume_async_" + std::to_string(own.size()));
    const std::string flags = kBase + "--strategy=async " + own + " --checkpoint-dir=" + dir;
    const auto first = run_train(flags + " --epochs=1", 3);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const std::vector<double> saved = async_clocks(dir);
    ASSERT_EQ(saved.size(), 2u) << own;
    const auto resumed = run_train(flags + " --epochs=2 --resume=" + dir, 3);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + dir), std::string::npos) << resumed.output;
    EXPECT_EQ(resumed.output.find("starts fresh"), std::string::npos) << resumed.output;
    EXPECT_EQ(resumed.output.find("start at 0"), std::string::npos) << resumed.output;
    const std::vector<double> now = async_clocks(dir);
    ASSERT_EQ(now.size(), 2u) << own;
    if (own.find("shared") == std::string::npos) {
      EXPECT_EQ(now[0], 2 * saved[0]) << own;
      EXPECT_EQ(now[1], 2 * saved[1]) << own;
    } else {
      EXPECT_EQ(now[0] + now[1], 2 * (saved[0] + saved[1])) << own;
    }
    const double before = json_number(last_json_line(first.output), "train_loss");
    const double after = json_number(last_json_line(resumed.output), "train_loss");
    EXPECT_TRUE(std::isfinite(after)) << resumed.output;
    EXPECT_LT(after, before) << own;
  }
}

// How often `part` occurs in `text`.
size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A checkpoint records the model and optimizer that wrote it: resuming into another is refused
// (exit 2, before any tensor is loaded), naming both, once: a full checkpoint in one process,
// and a sharded ZeRO-2 one on 2 ranks (its index carries them).
TEST(TrainResume, AnotherModelOrOptimizerIsRefusedNamingBoth) {
  const std::string full = temp_path("resume_origin_full");
  tessera::testing::run_command("rm -rf " + full);
  const auto first = run_train_single(kBase + "--optimizer=adamw --epochs=1 --checkpoint-dir=" + full);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto other = run_train_single(
      "--model=logistic --optimizer=sgd --train-limit=2000 --threads=1 --epochs=2 --resume=" + full);
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_EQ(count(other.output, "train: --resume=" + full + ": " + newest_checkpoint(full) +
                                    " was written by --model=mlp --optimizer=adamw; this run is "
                                    "--model=logistic --optimizer=sgd (resume with the same model "
                                    "and optimizer, or start afresh without --resume)"),
            1u) << other.output;
  EXPECT_EQ(other.output.find("resumed from"), std::string::npos) << other.output;

  const std::string sharded = temp_path("resume_origin_sharded");
  tessera::testing::run_command("rm -rf " + sharded);
  const std::string zero2 = kBase + "--strategy=zero2 --checkpoint-format=sharded ";
  const auto written = run_train(zero2 + "--epochs=1 --checkpoint-dir=" + sharded, 2);
  ASSERT_EQ(written.exit_code, 0) << written.output;
  const auto sgd = run_train(zero2 + "--optimizer=sgd --epochs=2 --resume=" + sharded, 2);
  EXPECT_EQ(sgd.exit_code, 2) << sgd.output;
  EXPECT_EQ(count(sgd.output, "was written by --model=mlp --optimizer=adam; this run is "
                              "--model=mlp --optimizer=sgd"), 1u) << sgd.output;
  // The same model and optimizer resume.
  const auto same = run_train(zero2 + "--epochs=2 --resume=" + sharded, 2);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("resumed from " + sharded), std::string::npos) << same.output;
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
