// The train tool end to end: a short real training run (logistic regression on 4,000
// Fashion-MNIST images passes 0.75 test accuracy in seconds), its output contract, bad flags,
// resuming from a checkpoint, and mixed precision.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/tools/overflowing_checkpoint.h"
#include "tests/util/test_util.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::last_json_line;
using tessera::testing::run_command;
using tessera::testing::temp_path;

std::string g_train;  // path of the train binary, from argv

tessera::testing::CommandResult run(const std::string& flags) {
  return run_command(g_train + " " + flags);
}

TEST(Train, ShortLogisticRunLearnsFashionMnist) {
  const std::string metrics = temp_path("metrics.jsonl");
  const auto r = run("--model=logistic --train-limit=4000 --epochs=2 --threads=2 --metrics=" + metrics);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string summary = last_json_line(r.output);
  ASSERT_FALSE(summary.empty()) << r.output;
  for (const char* key : {"model", "strategy", "world_size", "epochs", "train_loss", "test_accuracy",
                          "images_per_second", "wall_seconds", "peak_bytes"}) {
    EXPECT_NE(summary.find(std::string("\"") + key + "\""), std::string::npos) << key;
  }
  EXPECT_GT(json_number(summary, "test_accuracy"), 0.75) << summary;
  EXPECT_GT(json_number(summary, "peak_bytes"), 0);
  // One line per step (4000 images in batches of 64: 62 whole batches an epoch), one per epoch
  // with the accuracy.
  std::ifstream in(metrics);
  int steps = 0, epochs = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"kind\": \"epoch\"") != std::string::npos) {
      EXPECT_NE(line.find("\"test_accuracy\""), std::string::npos) << line;
      ++epochs;
    } else {
      EXPECT_NE(line.find("\"kind\": \"step\""), std::string::npos) << line;
      EXPECT_NE(line.find("\"loss\""), std::string::npos) << line;
      ++steps;
    }
  }
  EXPECT_EQ(epochs, 2);
  EXPECT_EQ(steps, 2 * 62);
  // Seconds per step with their spread, over the same 124 steps.
  const std::string spread = json_field(summary, "seconds_per_step");
  EXPECT_EQ(json_number(spread, "steps"), 2 * 62) << spread;
  EXPECT_GT(json_number(spread, "min"), 0) << spread;
  EXPECT_LE(json_number(spread, "min"), json_number(spread, "p10")) << spread;
  EXPECT_LE(json_number(spread, "p10"), json_number(spread, "median")) << spread;
  EXPECT_LE(json_number(spread, "median"), json_number(spread, "p90")) << spread;
  EXPECT_LE(json_number(spread, "p90"), json_number(spread, "max")) << spread;
}

// On a GPU the same short run learns as well; without one (or without --config=cuda) the tool
// ends with exit code 1 and the runtime's reason, which the test reports as its skip.
TEST(Train, ShortLogisticRunOnCudaLearnsOrSaysWhyItCannot) {
  const auto r = run("--model=logistic --train-limit=4000 --epochs=2 --device=cuda");
  // A device this machine lacks is a flag that cannot work here: exit 2, saying why.
  if (r.exit_code == 2 && (r.output.find("built without CUDA") != std::string::npos ||
                           r.output.find("no usable CUDA device") != std::string::npos ||
                           r.output.find("no CUDA device") != std::string::npos)) {
    GTEST_SKIP() << r.output;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string summary = last_json_line(r.output);
  EXPECT_NE(summary.find("\"device\": \"cuda:0\""), std::string::npos) << summary;
  EXPECT_GT(json_number(summary, "test_accuracy"), 0.75) << summary;
}

TEST(Train, BadFlagsExitWithTwoAndSayWhatWasWrong) {
  auto r = run("--model=logistic --bogus=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown flag --bogus"), std::string::npos) << r.output;
  r = run("--epochs=0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--epochs expects an integer >= 1, got '0'"), std::string::npos) << r.output;
  r = run("--model=vgg");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--model must be one of"), std::string::npos) << r.output;
  r = run("--lr=fast");
  EXPECT_EQ(r.exit_code, 2);
  r = run("--device=gpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--device must be cpu, cuda or cuda:N, got 'gpu'"), std::string::npos)
      << r.output;
  r = run("--data-dir=/nonexistent");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent"), std::string::npos) << r.output;
}

// fp16 (dynamic loss scale) and bf16 (no loss scaling, said once) autocast learn as f32 does.
TEST(Train, MixedPrecisionLearnsAndReportsItsLossScale) {
  for (const char* amp : {"fp16", "bf16"}) {
    const std::string metrics = temp_path(std::string("amp_") + amp + ".jsonl");
    std::remove(metrics.c_str());
    const auto r =
        run("--model=mlp --train-limit=2000 --epochs=2 --threads=2 --amp=" + std::string(amp) +
            " --metrics=" + metrics);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_EQ(json_number(s, "loss_scale"), std::string(amp) == "fp16" ? 65536 : 1) << s;
    EXPECT_GE(json_number(s, "skipped_steps"), 0) << s;
    EXPECT_GT(json_number(s, "test_accuracy"), 0.7) << s;
    if (std::string(amp) == "bf16") {
      EXPECT_NE(r.output.find("loss scaling is off"), std::string::npos) << r.output;
    }
    std::ifstream in(metrics);
    std::vector<double> losses;
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"kind\": \"epoch\"") != std::string::npos)
        losses.push_back(json_number(line, "train_loss"));
    }
    ASSERT_EQ(losses.size(), 2u) << amp;
    EXPECT_LT(losses[1], losses[0]) << amp;
  }
}

// The scaler's state rides in the checkpoint: a run resumed with the dynamic scaler continues
// from the scale saved (a static 1024 here), not from its initial 2^16.
TEST(Train, CheckpointsCarryTheLossScale) {
  const std::string dir = temp_path("amp_ckpt");
  const auto first =
      run("--model=logistic --train-limit=1000 --epochs=1 --amp=fp16 --loss-scale=1024 "
          "--checkpoint-dir=" +
          dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(json_number(last_json_line(first.output), "loss_scale"), 1024) << first.output;
  const auto second =
      run("--model=logistic --train-limit=1000 --epochs=2 --amp=fp16 --resume=" + dir);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(json_number(last_json_line(second.output), "loss_scale"), 1024) << second.output;
}

TEST(Train, BadPipelineAndPrecisionFlagsNameTheFlag) {
  struct Case {
    const char* flags;
    const char* says;
  };
  for (const Case& c : {
           Case{"--strategy=pipeline --micro-batches=0",
                "--micro-batches expects an integer >= 1 and <= 2147483647, got '0'"},
           Case{"--strategy=pipeline --pipeline-schedule=zigzag",
                "--pipeline-schedule must be one of gpipe|1f1b|interleaved"},
           Case{"--strategy=pipeline --balance=3,,4",
                "--balance must be uniform, params, time or layer counts"},
           Case{"--strategy=pipeline --balance=3,0", "got '3,0'"},
           Case{"--strategy=pipeline --chunks=2",
                "--chunks=2 needs --pipeline-schedule=interleaved"},
           Case{"--strategy=pipeline --checkpoint-activations=sometimes",
                "--checkpoint-activations must be one of"},
           Case{"--stages=2", "--stages needs --strategy=pipeline (got --strategy=single)"},
           Case{"--schedule=1f1b", "the pipeline's is --pipeline-schedule=1f1b"},
           Case{"--amp=fp8", "--amp must be one of off|fp16|bf16, got 'fp8'"},
           Case{"--amp=bf16 --loss-scale=128",
                "--loss-scale needs --amp=fp16 or --param-dtype=f16 (got --amp=bf16"},
           Case{"--loss-scale=dynamic",
                "--loss-scale needs --amp=fp16 or --param-dtype=f16 (got --amp=off"},
           Case{"--amp=fp16 --loss-scale=big", "--loss-scale expects"},
           Case{"--strategy=zero1 --compression=topk:0.1", "--compression=topk:0.1 with --strategy=zero1: the compressors are DDP's"},
           Case{"--strategy=zero3 --compression=fp16", "--compression=fp16 with --strategy=zero3"},
           Case{"--strategy=ddp --compression=topk:2", "the ratio must be in (0, 1], got 2"},
           Case{"--strategy=ddp --compression=gzip", "expected none, fp16, bf16"},
           Case{"--strategy=ddp --error-feedback=true", "--error-feedback needs --compression"},
           Case{"--strategy=ddp --compression=powersgd:0", "the rank must be an integer in [1, 1024], got 0"},
           Case{"--strategy=ddp --compression=topk:0.1 --powersgd-start-iter=5",
                "--powersgd-start-iter needs --compression=powersgd:RANK"},
           Case{"--net-bandwidth-gbps=0", "--net-bandwidth-gbps must be positive"},
           Case{"--strategy=ddp --gossip-topology=ring", "--gossip-topology needs --strategy=gossip"},
           Case{"--strategy=ddp --sync-period=4", "--sync-period needs --strategy=local-sgd"},
           Case{"--straggler=1:0.5", "factor must be a finite number >= 1, got 0.5"},
           Case{"--straggler=x", "expected RANK:FACTOR"},
           Case{"--straggler=1:2", "names a rank other than 0"},
           Case{"--strategy=local-sgd --sync-period=0", "--sync-period expects"},
           Case{"--strategy=local-sgd --outer-lr=0.5", "--outer-lr is DiLoCo's"},
           Case{"--strategy=gossip --gossip-topology=star", "--gossip-topology"},
           Case{"--net-latency-us=-3", "--net-latency-us expects a finite number >= 0"},
           Case{"--strategy=zero1 --bucket-cap-mb=1",
                "--bucket-cap-mb sizes the gradient buckets of --strategy=ddp and zero2"},
           Case{"--strategy=pipeline --stages=1 --dp-strategy=zero1 --bucket-cap-mb=1",
                "(got --strategy=pipeline --dp-strategy=zero1)"},
           Case{"--strategy=ddp --bucket-cap-mb=0", "--bucket-cap-mb must be positive"},
           Case{"--zero3-prefetch=false", "--zero3-prefetch needs --strategy=zero3"},
           Case{"--deferred-batch-norm=true",
                "--deferred-batch-norm needs --strategy=pipeline (got --strategy=single)"},
           Case{"--dp-strategy=zero1", "--dp-strategy needs --strategy=pipeline"},
           Case{"--strategy=zero3 --zero3-wrap=layers", "--zero3-wrap must be block, layer or params:N"},
           Case{"--strategy=zero3 --zero3-wrap=params:0", "--zero3-wrap expects an integer >= 1"},
       }) {
    const auto r = run(c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
  }
}

TEST(Train, ResumesFromACheckpoint) {
  const std::string dir = temp_path("ckpt");
  auto first = run("--model=logistic --train-limit=2000 --epochs=1 --checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = run("--model=logistic --train-limit=2000 --epochs=2 --resume=" + dir);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos);
  EXPECT_EQ(second.output.find("epoch 1/2  train_loss"), std::string::npos);  // epoch 1 skipped
  EXPECT_NE(second.output.find("epoch 2/2  train_loss"), std::string::npos) << second.output;
  // Another model: refused before loading, naming the checkpoint's and this run's.
  auto wrong = run("--model=mlp --epochs=2 --resume=" + dir);
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.output.find("was written by --model=logistic --optimizer=adam; this run is "
                              "--model=mlp --optimizer=adam"),
            std::string::npos) << wrong.output;
}

// Issue 14's flag and resume cases: each is an error naming the flag and value (exit 2), or a
// clear statement, never a silent surprise.
TEST(TrainReliability, NumericFlagsRejectOverflowAndInfinity) {
  for (const char* flags : {"--threads=99999999999", "--epochs=99999999999999999999", "--lr=inf",
                            "--momentum=nan", "--lr=1e999", "--stages=4294967297"}) {
    const auto r = run(std::string("--model=logistic ") + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    const std::string flag = std::string(flags).substr(0, std::string(flags).find('='));
    EXPECT_NE(r.output.find(flag + " expects"), std::string::npos) << flags << "\n" << r.output;
  }
}

TEST(TrainReliability, EmptyPathsAreErrors) {
  for (const char* flag : {"--resume=", "--checkpoint-dir=", "--metrics="}) {
    const auto r = run(std::string("--model=logistic ") + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find("empty value"), std::string::npos) << r.output;
  }
}

TEST(TrainReliability, AnExplicitWeightDecayOfZeroWins) {
  const auto r = run("--model=logistic --optimizer=adamw --weight-decay=0 --train-limit=500 --epochs=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("adamw lr 0.001 weight decay 0,"), std::string::npos) << r.output;
  const auto d = run("--model=logistic --optimizer=adamw --train-limit=500 --epochs=1");
  EXPECT_NE(d.output.find("adamw lr 0.001 weight decay 0.01,"), std::string::npos) << d.output;
}

TEST(TrainReliability, ResumeTakesADirectoryAndSaysWhenNothingIsLeft) {
  const std::string dir = temp_path("resume_dir");
  const auto first = run("--model=logistic --train-limit=1000 --epochs=1 --checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto more = run("--model=logistic --train-limit=1000 --epochs=2 --resume=" + dir);
  ASSERT_EQ(more.exit_code, 0) << more.output;
  EXPECT_NE(more.output.find("resumed from " + dir + "/step-00000015/checkpoint.safetensors after epoch 1"),
            std::string::npos) << more.output;
  // Already done: said, exit 0, and no result line of zeros.
  const auto done = run("--model=logistic --train-limit=1000 --epochs=1 --resume=" + dir);
  EXPECT_EQ(done.exit_code, 0) << done.output;
  EXPECT_NE(done.output.find("already completed 1 epoch, and --epochs is 1: nothing to train"),
            std::string::npos) << done.output;
  EXPECT_EQ(last_json_line(done.output), "") << done.output;
  const std::string empty_dir = temp_path("resume_empty");
  run_command("mkdir -p " + empty_dir);
  const auto none = run("--model=logistic --resume=" + empty_dir);
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find(empty_dir + " is a directory without last.safetensors"),
            std::string::npos) << none.output;
}

// The NaN guard: a diverging run stops in its first epoch with the epoch and batch named, exits
// non-zero, and leaves the checkpoint a good run saved in the same directory byte for byte.
TEST(TrainReliability, ADivergingRunStopsAndKeepsTheLastGoodCheckpoint) {
  const std::string dir = temp_path("nan_guard");
  const auto good = run("--model=logistic --train-limit=1000 --epochs=1 --checkpoint-dir=" + dir);
  ASSERT_EQ(good.exit_code, 0) << good.output;
  const auto before = run_command("cat " + dir + "/step-*/checkpoint.safetensors | cksum");
  const auto bad = run("--model=logistic --optimizer=sgd --lr=1e38 --train-limit=1000 --epochs=2 "
                       "--checkpoint-dir=" + dir);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("the training loss is not finite"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("at epoch 1, batch "), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("is left as it was"), std::string::npos) << bad.output;
  EXPECT_EQ(run_command("cat " + dir + "/step-*/checkpoint.safetensors | cksum").output, before.output);
}

// The NaN guard's second check: a step whose loss is finite but whose gradients overflow stops
// before the optimizer steps on them, naming the gradient norm, the epoch and the batch, and
// leaves the checkpoint as it was. (Without the check, the step made the weights inf and the
// loss check stopped the run one batch later, the damage done.)
TEST(TrainReliability, ANonFiniteGradientNormStopsTheRun) {
  const std::string dir = temp_path("grad_guard");
  const std::string flags = "--model=mlp --optimizer=sgd --train-limit=500 --threads=1 ";
  ASSERT_EQ(run(flags + "--epochs=1 --checkpoint-dir=" + dir).exit_code, 0);
  tessera::testing::make_gradients_overflow(dir + "/step-00000007/checkpoint.safetensors");
  const auto before = run_command("cat " + dir + "/step-*/checkpoint.safetensors | cksum");
  const auto r = run(flags + "--epochs=2 --resume=" + dir + " --checkpoint-dir=" + dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the training gradient norm is not finite (inf on this rank) at epoch "
                          "2, batch 1 of 7; stopping (the last checkpoint in " + dir +
                          " is left as it was)"), std::string::npos) << r.output;
  EXPECT_EQ(run_command("cat " + dir + "/step-*/checkpoint.safetensors | cksum").output, before.output);
  // Under fp16 loss scaling an overflowing step is the scaler's to skip: a scale of 1e30
  // overflows every step's gradients, and the run goes on, every step skipped.
  const auto scaled = run(flags + "--epochs=1 --amp=fp16 --loss-scale=1e30");
  EXPECT_EQ(scaled.exit_code, 0) << scaled.output;
  EXPECT_EQ(json_number(last_json_line(scaled.output), "skipped_steps"), 7) << scaled.output;
}

TEST(TrainReliability, AnImpossibleAllocationNamesWhatAndHowBig) {
  const auto r = run("--model=logistic --data=synthetic --synthetic-size=100000000000 --epochs=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("out of memory for the order of 100000000000 examples (800000000000 "
                          "bytes)"), std::string::npos) << r.output;
}

TEST(TrainReliability, AFailedMetricsWriteIsAnError) {
  const auto r = run("--model=logistic --train-limit=500 --epochs=1 --metrics=/dev/full");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("writing the --metrics file '/dev/full' failed after step 1"),
            std::string::npos) << r.output;
}

// Half-precision parameters: the optimizer keeps f32 masters (Adam: 12 bytes per parameter,
// the ZeRO paper's K), f16 ones are loss-scaled, and the runs learn like f32's.
TEST(Train, HalfPrecisionParametersLearnWithF32Masters) {
  const std::string base = "--model=logistic --train-limit=2000 --epochs=2 --threads=1 ";
  const auto f32 = run(base);
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  for (const char* dtype : {"bf16", "f16"}) {
    const auto r = run(base + "--param-dtype=" + dtype);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = last_json_line(r.output);
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(last_json_line(f32.output), "test_accuracy"),
                0.02) << s;
    EXPECT_EQ(json_field(s, "optimizer_state_bytes_per_rank"), "[94200]") << s;  // 7850 x 12
    // f16 parameters are loss-scaled (a first overflow may halve the scale once); bf16 not.
    if (std::string(dtype) == "f16") {
      EXPECT_GE(json_number(s, "loss_scale"), 16384) << s;
    } else {
      EXPECT_EQ(json_number(s, "loss_scale"), 1) << s;
    }
  }
  const auto mixed = run(base + "--amp=bf16 --param-dtype=f16");
  EXPECT_EQ(mixed.exit_code, 2) << mixed.output;
  EXPECT_NE(mixed.output.find("mixes f16 and bf16"), std::string::npos) << mixed.output;
  const auto window = run(base + "--loss-scale-window=10");
  EXPECT_EQ(window.exit_code, 2) << window.output;
  EXPECT_NE(window.output.find("--loss-scale-window needs --amp=fp16 or --param-dtype=f16"),
            std::string::npos) << window.output;
}

// The final train_loss of `config` run in NCHW and with --memory-format=`format`.
std::pair<double, double> train_losses_nchw_and(const std::string& config, const char* format) {
  const auto nchw = run(config);
  const auto other = run(config + " --memory-format=" + format);
  EXPECT_EQ(nchw.exit_code, 0) << nchw.output;
  EXPECT_EQ(other.exit_code, 0) << other.output;
  const double a = json_number(last_json_line(nchw.output), "train_loss");
  const double b = json_number(last_json_line(other.output), "train_loss");
  std::printf("%s: train_loss NCHW %.9g, %s %.9g\n", config.c_str(), a, format, b);
  return {a, b};
}

// --memory-format=channels-last trains as the NCHW run does: under f32 its convolutions run
// oneDNN's primitives on NHWC (the NCHW run's mostly tessera's own kernels), under bf16 NHWC
// where oneDNN runs them, and batch norm sums in another order; so the losses agree to
// rounding: 1e-4 for f32 (the same printed digits when measured) at a small learning rate
// (at ResNet-20's 0.1, four Nesterov steps grew f32 rounding to 0.1%), bf16's 5% at 0.1.
TEST(Train, ChannelsLastTrainsAsNchw) {
  const std::string base = "--model=resnet20 --train-limit=256 --batch-size=64 --epochs=1 "
                           "--threads=1 ";
  for (const char* amp : {"off", "bf16"}) {
    const std::string config =
        base + "--amp=" + amp + (std::string(amp) == "off" ? " --lr=0.001" : "");
    const auto [a, b] = train_losses_nchw_and(config, "channels-last");
    if (std::string(amp) == "off") {
      EXPECT_NEAR(a, b, 1e-4 * a);
    } else {
      EXPECT_NEAR(a, b, 0.05 * a) << amp;
    }
  }
}

// --memory-format=channels-blocked (nChw16c, f32 on the CPU) trains as the NCHW run does, to
// f32 rounding; under bf16 autocast the convolutions run in bf16, where the layout does not
// apply, and the run is the NCHW one's.
TEST(Train, ChannelsBlockedTrainsAsNchw) {
  const std::string base = "--model=resnet20 --train-limit=256 --batch-size=64 --epochs=1 "
                           "--threads=1 --lr=0.001 ";
  for (const char* amp : {"off", "bf16"}) {
    const auto [a, b] = train_losses_nchw_and(base + "--amp=" + amp, "channels-blocked");
    EXPECT_NEAR(a, b, 1e-4 * a) << amp;
  }
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_test PATH_TO_TRAIN\n");
    return 2;
  }
  g_train = argv[1];
  return RUN_ALL_TESTS();
}
