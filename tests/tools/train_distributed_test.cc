// The train tool on 2 ranks under mpirun: DDP and ZeRO-1 both learn, report world_size 2, send
// the ring all-reduce's bytes per step, and ZeRO-1 holds half the optimizer state per rank;
// ZeRO-2 and -3 end where DDP does; the communication bytes equal their formulas; buckets,
// units and prefetch keep the result; compression reports its bytes and resumes exactly;
// sharded checkpoints resume under other shardings and in one process; mixed precision trains
// under every strategy; channels-blocked activations end where NCHW ones do under ZeRO-3 with
// fp16 autocast and a pipeline times DDP or ZeRO-1 (f16 parameters). (The pipeline's own runs
// are train_pipeline_test.cc's; faults, refusals and the NaN guards on several ranks
// train_faults_test.cc's.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::kShortMlp;
using tessera::testing::last_json_line;
using tessera::testing::run_train;
using tessera::testing::run_train_single;
using tessera::testing::temp_path;

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

TEST(TrainDistributed, DdpAndZero1Learn) {
  // logistic regression: 7850 f32 parameters; a 2-rank ring all-reduce sends 2 * 1/2 of them,
  // and the NaN guard's flag (one f64 all-reduced per step) 8 bytes more.
  const int64_t ring_bytes = 7850 * 4 + 8;
  for (const char* strategy : {"ddp", "zero1"}) {
    const auto r = run_train(
        std::string("--model=logistic --train-limit=4000 --epochs=3 --threads=1 --strategy=") +
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

// ZeRO-2 and ZeRO-3 reduce the same averaged gradients as DDP and step every element alike, so
// they end where DDP does (the same tolerance as the pipeline's: only the order of float sums
// differs). ZeRO-3 sends 1.5x DDP's bytes (two all-gathers and a reduce-scatter of the padded
// flat parameters against one all-reduce); its checkpoint holds the whole model and one process
// resumes from it.
TEST(TrainDistributed, ZeroStagesTwoAndThreeEndWhereDdpDoes) {
  const auto ddp = run_train(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  const std::string dir = temp_path("zero3_ckpt");
  for (const char* strategy : {"zero2", "zero3"}) {
    const auto r = run_train(kShortMlp + "--strategy=" + strategy + " --checkpoint-dir=" + dir);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << s;
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
        << s;
    const double ratio =
        json_number(s, "comm_bytes_per_step") / json_number(reference, "comm_bytes_per_step");
    EXPECT_NEAR(ratio, std::string(strategy) == "zero3" ? 1.5 : 1.0, 0.01) << s;
  }
  const auto resumed = run_train_single(
      "--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 --resume=" + dir);
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
    const auto r = run_train("--model=mlp --train-limit=640 --epochs=1 --threads=1 " + c.flags);
    ASSERT_EQ(r.exit_code, 0) << c.flags << "\n" << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_EQ(json_number(s, "comm_bytes_per_step"), c.bytes) << c.flags << "\n" << s;
    EXPECT_EQ(json_number(s, "comm_bytes_per_step_theory"), c.bytes) << c.flags << "\n" << s;
  }
}

// The bucket size and ZeRO-3's units and prefetch change when bytes move, not what is computed:
// each ends where DDP with default buckets does.
TEST(TrainDistributed, BucketsUnitsAndPrefetchKeepTheResult) {
  const auto ddp = run_train(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  for (const char* flags : {"--strategy=ddp --bucket-cap-mb=0.05",
                            "--strategy=zero2 --bucket-cap-mb=0.05",
                            "--strategy=zero2 --compression=fp16",
                            "--strategy=pipeline --stages=1 --dp-strategy=zero2 --bucket-cap-mb=0.05",
                            "--strategy=zero3 --zero3-wrap=params:100000 --zero3-prefetch=false",
                            "--strategy=zero3 --zero3-wrap=block --zero3-prefetch=true",
                            "--strategy=zero3 --zero3-wrap=layer"}) {
    const auto r = run_train(kShortMlp + flags);
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
  const auto ddp = run_train(kShortMlp + "--strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  for (const char* spec : {"fp16", "topk:0.01", "randomk:0.05", "qsgd:4", "sign",
                           "powersgd:2 --powersgd-start-iter=4"}) {
    const auto r = run_train(kShortMlp + "--strategy=ddp --compression=" + spec +
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
    const auto straight = run_train(base + "--epochs=2");
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    const std::string dir = temp_path("compression_ckpt_" + std::string(spec).substr(0, 4));
    const auto first = run_train(base + "--epochs=1 --checkpoint-dir=" + dir);
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const auto resumed = run_train(base + "--epochs=2 --resume=" + dir);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(resumed.output.find("starts fresh"), std::string::npos) << resumed.output;
    const std::string a = last_json_line(straight.output), b = last_json_line(resumed.output);
    EXPECT_EQ(json_number(a, "train_loss"), json_number(b, "train_loss")) << spec;
    EXPECT_EQ(json_number(a, "test_accuracy"), json_number(b, "test_accuracy")) << spec;
  }
}

// --checkpoint-format=sharded: each rank of a ZeRO-2 run writes its shard (DIR/step-00000015/
// shard-0000r-of-00002.safetensors, and rank 0 index.safetensors), with fp16's loss scaler in
// the index. Resumed under ZeRO-2 it ends exactly where the uninterrupted run does, loss scale
// included; under ZeRO-3 (another sharding of the same state) to float rounding; one process
// reads it too. A strategy that does not shard refuses the flag, and a pipeline the directory.
TEST(TrainDistributed, ShardedCheckpointsResumeUnderZeroStagesAndOneProcess) {
  const std::string base = "--model=mlp --train-limit=2000 --threads=1 --seed=3 --amp=fp16 "
                           "--loss-scale-window=10 ";
  const auto whole = run_train(base + "--epochs=2 --strategy=zero2");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string expected = last_json_line(whole.output);

  const std::string dir = temp_path("sharded_ckpt");
  const auto first = run_train(base + "--epochs=1 --strategy=zero2 --checkpoint-format=sharded "
                         "--checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const char* file : {"/step-00000015/index.safetensors",
                           "/step-00000015/shard-00001-of-00002.safetensors",
                           "/step-00000015/shard-00002-of-00002.safetensors"}) {
    EXPECT_TRUE(std::ifstream(dir + file).good()) << dir + file;
  }
  for (const char* strategy : {"zero2", "zero3"}) {
    const auto resumed = run_train(base + "--epochs=2 --strategy=" + strategy + " --resume=" + dir);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + dir + "/step-00000015 after epoch 1"),
              std::string::npos) << resumed.output;
    const std::string s = last_json_line(resumed.output);
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(expected, "train_loss"),
                std::string(strategy) == "zero2" ? 0.0 : 1e-5) << strategy;
    EXPECT_EQ(json_number(s, "loss_scale"), json_number(expected, "loss_scale")) << strategy;
  }
  const auto single = run_train_single(base + "--epochs=2 --resume=" + dir + "/step-00000015");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NE(single.output.find("after epoch 1"), std::string::npos) << single.output;

  const auto refused = run_train(base + "--epochs=1 --strategy=ddp --checkpoint-format=sharded");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--checkpoint-format=sharded with --strategy=ddp: the sharded "
                                "format writes ZeRO's shards, one file per rank"),
            std::string::npos) << refused.output;
  const auto pipeline = run_train(base + "--epochs=2 --strategy=pipeline --resume=" + dir);
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
        run_train("--model=mlp --train-limit=2000 --epochs=2 --threads=1 --seed=3 --strategy=" +
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
    const auto nchw = run_train(base + c.flags, c.ranks);
    const auto blocked = run_train(base + c.flags + " --memory-format=channels-blocked", c.ranks);
    ASSERT_EQ(nchw.exit_code, 0) << nchw.output;
    ASSERT_EQ(blocked.exit_code, 0) << blocked.output;
    const double a = json_number(last_json_line(nchw.output), "train_loss");
    const double b = json_number(last_json_line(blocked.output), "train_loss");
    std::printf("%s: train_loss NCHW %.9g, channels-blocked %.9g\n", c.flags, a, b);
    EXPECT_NEAR(a, b, 1e-4 * a) << c.flags;
  }
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
