// The train tool on 2 ranks under mpirun: DDP and ZeRO-1 both learn, report world_size 2, send
// the ring all-reduce's bytes per step, and ZeRO-1 holds half the optimizer state per rank. A
// 2-stage pipeline ends where one process does (and 2 stages x 2 replicas where DDP does);
// ZeRO-2 and -3 end where DDP does; the communication bytes equal their formulas; compression
// reports its bytes and resumes exactly; checkpoints move between strategies; mixed precision
// trains under DDP, ZeRO and the pipeline; bad pipeline flags end every rank with code 2; the
// pipeline's trace has every stage's micro-batches; channels-blocked activations end where NCHW
// ones do under ZeRO-3 with fp16 autocast and a pipeline times DDP or ZeRO-1 (f16 parameters). (Faults, refusals and the NaN guards on
// several ranks are train_faults_test.cc's.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::last_json_line;
using tessera::testing::temp_path;

tessera::testing::CommandResult run(const std::string& flags, int ranks = 2) {
  return tessera::testing::run_train(flags, ranks);
}
tessera::testing::CommandResult run_single(const std::string& flags) {
  return tessera::testing::run_train_single(flags);
}

// The per-epoch train_loss values of a --metrics file (its epoch lines; the others are steps').
std::vector<double> epoch_losses(const std::string& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"kind\": \"epoch\"") != std::string::npos)
      out.push_back(json_number(line, "train_loss"));
  }
  return out;
}

// A short MLP run (the pipeline needs a layer with parameters in each stage: Flatten + Linear,
// ReLU + Linear): 31 steps of 64 images, a full test-set evaluation.
const std::string kShortMlp = "--model=mlp --train-limit=2000 --epochs=1 --threads=1 --seed=3 ";

TEST(TrainDistributed, DdpAndZero1Learn) {
  // logistic regression: 7850 f32 parameters; a 2-rank ring all-reduce sends 2 * 1/2 of them,
  // and the NaN guard's flag (one f64 all-reduced per step) 8 bytes more.
  const int64_t ring_bytes = 7850 * 4 + 8;
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
    // Adam holds two f32 moments: 62,800 bytes unsharded; a ZeRO-1 rank half of that and its
    // f32 master shard (15,700).
    EXPECT_EQ(json_field(s, "optimizer_state_bytes_per_rank"),
              std::string(strategy) == "zero1" ? "[47100, 47100]" : "[62800, 62800]")
        << s;
  }
}

// Pipe leaves in each stage the gradient of the whole batch (micro-batch losses weighted by
// their share), so a 2-stage pipeline steps Adam exactly as one process does, up to the order
// of float sums (micro-batch partial sums, ~1e-7 relative per step). Over 31 steps that stays
// far below the 1e-4 allowed on the loss; test accuracy may flip a prediction near a tie, so
// 0.002 (20 of 10,000 images) is allowed there. Observed: identical to 6 digits.
TEST(TrainDistributed, PipelineEndsWhereOneProcessDoes) {
  const auto single = run_single(kShortMlp);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string reference = last_json_line(single.output);
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const auto r =
        run(kShortMlp + "--strategy=pipeline --micro-batches=4 --pipeline-schedule=" + schedule);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    ASSERT_FALSE(s.empty()) << r.output;
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << s;
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
        << s;
    const std::string pipeline = json_field(s, "pipeline");  // the pipeline's own object
    ASSERT_FALSE(pipeline.empty()) << s;
    EXPECT_EQ(json_field(pipeline, "schedule"), std::string("\"") + schedule + "\"");
    EXPECT_EQ(json_field(pipeline, "dp_strategy"), "\"ddp\"") << pipeline;
    EXPECT_EQ(json_number(s, "stages"), 2) << s;
    EXPECT_EQ(json_number(s, "micro_batches"), 4) << s;
    EXPECT_EQ(json_field(s, "balance"), "[2, 2]") << s;
    EXPECT_DOUBLE_EQ(json_number(s, "bubble_theory"), 0.2) << s;  // (K-1)/(M+K-1) = 1/5
    const double idle = json_number(s, "bubble_measured");
    EXPECT_GE(idle, 0) << s;
    EXPECT_LT(idle, 1) << s;
    // Stage 1 (ReLU, Linear(256, 10)) holds Adam's state for 2,570 parameters only.
    EXPECT_EQ(json_field(s, "optimizer_state_bytes_per_rank"), "[1607680, 20560]") << s;
    EXPECT_NE(r.output.find("bubble (K-1)/(vM+K-1) = 1/5 = 0.200"), std::string::npos) << r.output;
    // Per rank: what a stage held between two actions is part of its step's peak.
    long long peak[2] = {0, 0}, held[2] = {0, 0};
    ASSERT_EQ(std::sscanf(json_field(s, "peak_activation_bytes").c_str(), "[%lld, %lld]", &peak[0],
                          &peak[1]), 2) << s;
    ASSERT_EQ(std::sscanf(json_field(s, "peak_held_bytes").c_str(), "[%lld, %lld]", &held[0],
                          &held[1]), 2) << s;
    for (int r = 0; r < 2; ++r) {
      EXPECT_GT(held[r], 0) << s;
      EXPECT_LE(held[r], peak[r]) << s;
    }
  }
}

// More micro-batches than rows in a batch: the pipeline runs min(M, B), and the start-up line,
// the bubble line and the JSON all say that M (the JSON keeps the request beside it).
TEST(TrainDistributed, FewerRowsThanMicroBatchesIsSaidOnce) {
  const auto r = run("--model=mlp --train-limit=64 --epochs=1 --threads=1 --seed=3 "
                     "--strategy=pipeline --micro-batches=8 --batch-size=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--micro-batches=8, but a batch of 4 rows per replica makes 4 "
                          "micro-batches of one row: the pipeline runs M = 4"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(1f1b, M=4, v=1)"), std::string::npos) << r.output;
  const std::string s = last_json_line(r.output);
  EXPECT_EQ(json_number(s, "micro_batches"), 4) << s;
  EXPECT_EQ(json_number(s, "micro_batches_requested"), 8) << s;
  EXPECT_DOUBLE_EQ(json_number(s, "bubble_theory"), 0.2) << s;  // 1/(4+1), not 1/(8+1)
}

// 4 ranks as 2 stages x 2 replicas: --batch-size is per replica, so this trains on the same
// global batch (2 x 32) as 2-rank DDP, and ends where it does (tolerances as above), whether
// each stage's replicas average their gradients after the batch (--dp-strategy=ddp), shard
// the stage's optimizer state with ZeRO-1 (zero1: each rank holds half its stage's Adam state)
// or its gradients too with ZeRO-2 (zero2: reduce-scattered after each micro-batch's backward).
TEST(TrainDistributed, PipelineTimesDataParallelMatchesDdp) {
  const auto ddp = run(kShortMlp + "--batch-size=32 --strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  for (const char* dp : {"ddp", "zero1", "zero2"}) {
    const auto pp = run(kShortMlp + "--batch-size=32 --strategy=pipeline --stages=2 --dp-strategy=" +
                            dp, 4);
    ASSERT_EQ(pp.exit_code, 0) << pp.output;
    const std::string s = last_json_line(pp.output);
    EXPECT_EQ(json_number(s, "world_size"), 4) << s;
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << s;
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
        << s;
    EXPECT_EQ(json_field(json_field(s, "pipeline"), "dp_strategy"), std::string("\"") + dp + "\"");
  }
}

// ZeRO-2 and ZeRO-3 reduce the same averaged gradients as DDP and step every element alike, so
// they end where DDP does (the same tolerance as the pipeline's: only the order of float sums
// differs). ZeRO-3 sends 1.5x DDP's bytes (two all-gathers and a reduce-scatter of the padded
// flat parameters against one all-reduce); its checkpoint holds the whole model and one process
// resumes from it.
TEST(TrainDistributed, ZeroStagesTwoAndThreeEndWhereDdpDoes) {
  const auto ddp = run(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  const std::string dir = temp_path("zero3_ckpt");
  for (const char* strategy : {"zero2", "zero3"}) {
    const auto r = run(kShortMlp + "--strategy=" + strategy + " --checkpoint-dir=" + dir);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << s;
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
        << s;
    const double ratio =
        json_number(s, "comm_bytes_per_step") / json_number(reference, "comm_bytes_per_step");
    EXPECT_NEAR(ratio, std::string(strategy) == "zero3" ? 1.5 : 1.0, 0.01) << s;
  }
  const auto resumed = run_single("--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 "
                                  "--resume=" + dir + "/last.safetensors");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_GT(json_number(last_json_line(resumed.output), "test_accuracy"), 0.7) << resumed.output;
}

// The final JSON's communication beside its theory (tools/train/memory_report.h): the byte
// ledger's bytes per step on rank 0 equal 2 (N-1)/N of the reduced bytes for DDP (the
// gradients' dtype) and ZeRO-1/2 (their f32 flat vector), 3 (N-1)/N for ZeRO-3 (the parameters'
// dtype), plus the NaN guard's 8 bytes and, under fp16 loss scaling, found_inf's 4. The MLP's
// 203,530 parameters and its units divide by 2, so the figures are exact; written out here too.
TEST(TrainDistributed, CommunicationBytesEqualTheirTheory) {
  const int64_t psi = 203530;
  struct Case {
    std::string flags;
    int64_t bytes;
  };
  for (const Case& c : {Case{"--strategy=ddp", psi * 4 + 8}, Case{"--strategy=zero1", psi * 4 + 8},
                        Case{"--strategy=zero2", psi * 4 + 8},
                        Case{"--strategy=zero3", 3 * psi * 4 / 2 + 8},
                        Case{"--strategy=ddp --amp=fp16", psi * 4 + 8 + 4},
                        Case{"--strategy=zero3 --param-dtype=bf16", 3 * psi * 2 / 2 + 8}}) {
    const auto r = run("--model=mlp --train-limit=640 --epochs=1 --threads=1 " + c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.flags << "\n" << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_EQ(json_number(s, "comm_bytes_per_step"), c.bytes) << c.flags << "\n" << s;
    EXPECT_EQ(json_number(s, "comm_bytes_per_step_theory"), c.bytes) << c.flags << "\n" << s;
  }
}

// The bucket size and ZeRO-3's units and prefetch change when bytes move, not what is computed:
// each ends where DDP with default buckets does.
TEST(TrainDistributed, BucketsUnitsAndPrefetchKeepTheResult) {
  const auto ddp = run(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  for (const char* flags : {"--strategy=ddp --bucket-cap-mb=0.05",
                            "--strategy=zero2 --bucket-cap-mb=0.05",
                            "--strategy=zero2 --compression=fp16",
                            "--strategy=pipeline --stages=1 --dp-strategy=zero2 --bucket-cap-mb=0.05",
                            "--strategy=zero3 --zero3-wrap=params:100000 --zero3-prefetch=false",
                            "--strategy=zero3 --zero3-wrap=block --zero3-prefetch=true",
                            "--strategy=zero3 --zero3-wrap=layer"}) {
    const auto r = run(kShortMlp + flags);
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << flags;
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
        << flags;
  }
}

// A pipeline checkpoint holds the whole model under its unpipelined names and the stages'
// optimizer state gathered into the unpipelined optimizer's (pipeline/optimizer_state.h): one
// process resumes from it, a pipeline resumes from one process's, and either way epoch 2 ends
// where an uninterrupted one-process run does (Adam's moments and step count carried over; a
// fresh Adam would end elsewhere: its first steps are lr-sized). The tolerance is the
// pipeline's (float sums in another order).
// --compression on 2 ranks: the JSON's bytes per step (the ledger's, over the buckets) equal the
// compressor's formula, a fraction of the uncompressed all-reduce's; fp16 ends near DDP; an
// emulated network is reported with the time its messages took in the model.
TEST(TrainDistributed, CompressionReportsItsBytesAndTheEmulatedNetwork) {
  const auto ddp = run(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  for (const char* spec : {"fp16", "topk:0.01", "randomk:0.05", "qsgd:4", "sign",
                           "powersgd:2 --powersgd-start-iter=4"}) {
    const auto r = run(kShortMlp + "--strategy=ddp --compression=" + spec +
                       " --net-latency-us=20 --net-bandwidth-gbps=10");
    ASSERT_EQ(r.exit_code, 0) << spec << "\n" << r.output;
    const std::string s = last_json_line(r.output);
    const std::string c = json_field(s, "compression");
    ASSERT_FALSE(c.empty()) << s;
    EXPECT_NEAR(json_number(c, "ratio"), json_number(c, "ratio_theory"), 1e-6) << spec << " " << c;
    EXPECT_LT(json_number(c, "ratio"), 0.55) << spec << " " << c;
    EXPECT_GT(json_number(json_field(s, "network"), "emulated_seconds"), 0) << s;
    if (std::string(spec) == "fp16") {
      EXPECT_NEAR(json_number(s, "train_loss"), json_number(last_json_line(ddp.output), "train_loss"), 2e-3)
          << s;
    }
  }
}

// A compression hook's state is every rank's own (top-k's error-feedback residuals, QSGD's
// step counters that key its random draws): checkpoints keep every rank's, and a resumed
// second epoch ends exactly where two epochs in one run do (without the residuals top-k ends at
// train loss 1.30286 instead of 1.28571).
TEST(TrainDistributed, CompressionStateResumesExactly) {
  for (const char* spec : {"topk:0.01", "qsgd:4", "powersgd:2 --powersgd-start-iter=4"}) {
    const std::string base = "--model=mlp --train-limit=2000 --threads=1 --seed=3 --strategy=ddp "
                             "--compression=" + std::string(spec) + " ";
    const auto straight = run(base + "--epochs=2");
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    const std::string dir = temp_path("compression_ckpt_" + std::string(spec).substr(0, 4));
    const auto first = run(base + "--epochs=1 --checkpoint-dir=" + dir);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const auto resumed = run(base + "--epochs=2 --resume=" + dir);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(resumed.output.find("starts fresh"), std::string::npos) << resumed.output;
    const std::string a = last_json_line(straight.output), b = last_json_line(resumed.output);
    EXPECT_EQ(json_number(a, "train_loss"), json_number(b, "train_loss")) << spec;
    EXPECT_EQ(json_number(a, "test_accuracy"), json_number(b, "test_accuracy")) << spec;
  }
}

TEST(TrainDistributed, PipelineCheckpointsCarryTheOptimizerStateBothWays) {
  const std::string base = "--model=mlp --train-limit=2000 --threads=1 --seed=3 ";
  const auto whole = run_single(base + "--epochs=2");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const double expected = json_number(last_json_line(whole.output), "train_loss");

  const std::string from_pipeline = temp_path("pipeline_ckpt");
  const auto first = run(base + "--epochs=1 --strategy=pipeline --checkpoint-dir=" + from_pipeline);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_single(base + "--epochs=2 --resume=" + from_pipeline + "/last.safetensors");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(second.output.find("the optimizer starts fresh"), std::string::npos) << second.output;
  EXPECT_NEAR(json_number(last_json_line(second.output), "train_loss"), expected, 1e-4)
      << second.output;

  const std::string from_single = temp_path("single_ckpt");
  const auto third = run_single(base + "--epochs=1 --checkpoint-dir=" + from_single);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  const auto fourth = run(base + "--epochs=2 --strategy=pipeline --resume=" + from_single +
                          "/last.safetensors");
  ASSERT_EQ(fourth.exit_code, 0) << fourth.output;
  EXPECT_EQ(fourth.output.find("the optimizer starts fresh"), std::string::npos) << fourth.output;
  EXPECT_NEAR(json_number(last_json_line(fourth.output), "train_loss"), expected, 1e-4)
      << fourth.output;
}

// --checkpoint-format=sharded: each rank of a ZeRO-2 run writes its shard (DIR/last-sharded/
// shard-0000r-of-00002.safetensors, and rank 0 index.safetensors), with fp16's loss scaler in
// the index. Resumed under ZeRO-2 it ends exactly where the uninterrupted run does, loss scale
// included; under ZeRO-3 (another sharding of the same state) to float rounding; one process
// reads it too. A strategy that does not shard refuses the flag, and a pipeline the directory.
TEST(TrainDistributed, ShardedCheckpointsResumeUnderZeroStagesAndOneProcess) {
  const std::string base = "--model=mlp --train-limit=2000 --threads=1 --seed=3 --amp=fp16 "
                           "--loss-scale-window=10 ";
  const auto whole = run(base + "--epochs=2 --strategy=zero2");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string expected = last_json_line(whole.output);

  const std::string dir = temp_path("sharded_ckpt");
  const auto first = run(base + "--epochs=1 --strategy=zero2 --checkpoint-format=sharded "
                         "--checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const char* file : {"/last-sharded/index.safetensors",
                           "/last-sharded/shard-00001-of-00002.safetensors",
                           "/last-sharded/shard-00002-of-00002.safetensors"}) {
    EXPECT_TRUE(std::ifstream(dir + file).good()) << dir + file;
  }
  for (const char* strategy : {"zero2", "zero3"}) {
    const auto resumed = run(base + "--epochs=2 --strategy=" + strategy + " --resume=" + dir);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + dir + "/last-sharded after epoch 1"),
              std::string::npos) << resumed.output;
    const std::string s = last_json_line(resumed.output);
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(expected, "train_loss"),
                std::string(strategy) == "zero2" ? 0.0 : 1e-5) << strategy;
    EXPECT_EQ(json_number(s, "loss_scale"), json_number(expected, "loss_scale")) << strategy;
  }
  const auto single = run_single(base + "--epochs=2 --resume=" + dir + "/last-sharded");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NE(single.output.find("after epoch 1"), std::string::npos) << single.output;

  const auto refused = run(base + "--epochs=1 --strategy=ddp --checkpoint-format=sharded");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--checkpoint-format=sharded writes ZeRO's shards, one file per "
                                "rank: it needs --strategy=zero1, zero2 or zero3"),
            std::string::npos) << refused.output;
  const auto pipeline = run(base + "--epochs=2 --strategy=pipeline --resume=" + dir);
  EXPECT_NE(pipeline.exit_code, 0);
  EXPECT_NE(pipeline.output.find("is a sharded (ZeRO) checkpoint"), std::string::npos)
      << pipeline.output;
}

// fp16 and bf16 autocast train under DDP, ZeRO-2, ZeRO-3 (units gathered in bf16) and the
// pipeline: the loss falls from epoch
// to epoch, and the JSON reports the scale (fp16: dynamic, 2^16 for fewer than 2000 steps;
// bf16: no scaling, 1) and the skipped steps, identical on every rank by construction.
TEST(TrainDistributed, MixedPrecisionTrainsUnderEveryStrategy) {
  struct Case {
    const char* strategy;
    const char* amp;
  };
  for (const Case& c : {Case{"ddp", "fp16"}, Case{"ddp", "bf16"}, Case{"zero2", "fp16"},
                        Case{"zero3", "bf16"}, Case{"pipeline", "fp16"}}) {
    const std::string metrics =
        temp_path(std::string("amp_") + c.strategy + "_" + c.amp + ".jsonl");
    std::remove(metrics.c_str());
    const auto r =
        run("--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 --strategy=" +
            std::string(c.strategy) + " --amp=" + c.amp + " --metrics=" + metrics);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_EQ(json_field(s, "amp"), std::string("\"") + c.amp + "\"") << s;
    EXPECT_EQ(json_number(s, "loss_scale"), std::string(c.amp) == "fp16" ? 65536 : 1) << s;
    EXPECT_GE(json_number(s, "skipped_steps"), 0) << s;
    EXPECT_LE(json_number(s, "skipped_steps"), 2) << s;  // at most a couple at the start
    const std::vector<double> losses = epoch_losses(metrics);
    ASSERT_EQ(losses.size(), 2u) << c.strategy << " " << c.amp;
    EXPECT_LT(losses[1], losses[0]) << c.strategy << " " << c.amp;
    EXPECT_LT(losses[1], 0.8) << c.strategy << " " << c.amp;
  }
}

// --memory-format=channels-blocked composes with the strategies and precisions: ZeRO-3 under
// fp16 autocast (its convolutions then run in f16, where the layout does not apply, so the
// blocked model runs as the NCHW one), a 2-stage pipeline times 2 DDP replicas in f32 (each
// stage's activations blocked, sent between stages as NCHW copies), and the same with f16
// parameters under ZeRO-1. Each ends where its NCHW run does, to f32 rounding (lr 0.001, as
// train_test.cc's layout comparisons).
TEST(TrainDistributed, ChannelsBlockedEndsWhereNchwDoesUnderZero3AmpAndPipelineTimesDp) {
  const std::string base = "--model=resnet20 --train-limit=256 --batch-size=64 --epochs=1 "
                           "--threads=1 --lr=0.001 ";
  struct Case {
    const char* flags;
    int ranks;
  };
  for (const Case& c : {Case{"--strategy=zero3 --amp=fp16", 2},
                        Case{"--strategy=pipeline --stages=2 --dp-strategy=ddp", 4},
                        Case{"--strategy=pipeline --stages=2 --dp-strategy=zero1 "
                             "--param-dtype=f16", 4}}) {
    const auto nchw = run(base + c.flags, c.ranks);
    const auto blocked = run(base + c.flags + " --memory-format=channels-blocked", c.ranks);
    ASSERT_EQ(nchw.exit_code, 0) << nchw.output;
    ASSERT_EQ(blocked.exit_code, 0) << blocked.output;
    const double a = json_number(last_json_line(nchw.output), "train_loss");
    const double b = json_number(last_json_line(blocked.output), "train_loss");
    std::printf("%s: train_loss NCHW %.9g, channels-blocked %.9g\n", c.flags, a, b);
    EXPECT_NEAR(a, b, 1e-4 * a) << c.flags;
  }
}

// Pipeline options that cannot work on 2 ranks: code 2 on every rank, the flag named, no hang.
TEST(TrainDistributed, BadPipelineFlagsExitWithTwo) {
  struct Case {
    const char* flags;
    const char* says;
  };
  for (const Case& c : {
           Case{"--stages=3", "--stages=3 does not divide the 2 ranks"},
           Case{"--pipeline-schedule=interleaved --micro-batches=3",
                "--pipeline-schedule=interleaved needs --micro-batches (3) to be a multiple of "
                "--stages=2"},
           // Raised by Pipe itself, identically on every rank.
           Case{"--balance=1,2", "--balance=1,2: pipeline/balance.cc"},
           Case{"--model=logistic", "Pipe: stage 0 would hold no parameters"},
           Case{"--pipeline-schedule=interleaved --chunks=3",
                "Pipe: 6 pipeline parts (2 stages x 3 chunks)"},
       }) {
    const auto r =
        run("--model=mlp --data=synthetic --synthetic-size=256 --threads=1 --strategy=pipeline " +
            std::string(c.flags));
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
  }
}

// --trace: rank 0 writes the last training step of every stage (one process per rank, its
// actions on its compute track, tid 0) as a Chrome trace, each with M forwards and M backwards.
TEST(TrainDistributed, PipelineTraceHasEveryStagesMicroBatches) {
  const std::string file = temp_path("pipeline_trace.json");
  const auto r = run(kShortMlp + "--strategy=pipeline --micro-batches=4 --trace=" + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // One event per line: {"name":"F0","cat":"forward",...,"pid":1,"tid":0,"args":{...}}, and
  // each rank's name: {"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"rank 1"}}
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_FALSE(lines.empty()) << file;
  for (int stage = 0; stage < 2; ++stage) {
    const std::string track = "\"pid\":" + std::to_string(stage) + ",\"tid\":0,";
    int names = 0, forwards = 0, backwards = 0;
    for (const std::string& line : lines) {
      names += line.find("\"args\":{\"name\":\"rank " + std::to_string(stage) + "\"}") !=
               std::string::npos;
      if (line.find(track) == std::string::npos) continue;
      forwards += line.find("\"cat\":\"forward\"") != std::string::npos;
      backwards += line.find("\"cat\":\"backward\"") != std::string::npos;
    }
    EXPECT_EQ(names, 1) << "stage " << stage;
    EXPECT_EQ(forwards, 4) << "stage " << stage;
    EXPECT_EQ(backwards, 4) << "stage " << stage;
  }
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
