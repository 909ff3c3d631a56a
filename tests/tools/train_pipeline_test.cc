// The train tool's pipeline on 2 and 4 ranks under mpirun: 2 stages end where one process does
// under GPipe and 1F1B, with the bubble, the stages' balance, optimizer state and held
// activations in the JSON; more micro-batches than rows is said once; 2 stages x 2 replicas end
// where DDP does under ddp, zero1 and zero2; checkpoints carry the optimizer state between a
// pipeline and one process both ways; bad pipeline flags end every rank with code 2; the trace
// has every stage's micro-batches.
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

// Pipe leaves in each stage the gradient of the whole batch (micro-batch losses weighted by
// their share), so a 2-stage pipeline steps Adam exactly as one process does, up to the order
// of float sums (micro-batch partial sums, ~1e-7 relative per step). Over 31 steps that stays
// far below the 1e-4 allowed on the loss; test accuracy may flip a prediction near a tie, so
// 0.002 (20 of 10,000 images) is allowed there. Observed: identical to 6 digits.
TEST(TrainPipeline, PipelineEndsWhereOneProcessDoes) {
  const auto single = run_train_single(kShortMlp);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const std::string reference = last_json_line(single.output);
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const auto r = run_train(kShortMlp + "--strategy=pipeline --micro-batches=4 "
                             "--pipeline-schedule=" + schedule);
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
TEST(TrainPipeline, FewerRowsThanMicroBatchesIsSaidOnce) {
  const auto r = run_train("--model=mlp --train-limit=64 --epochs=1 --threads=1 --seed=3 "
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
TEST(TrainPipeline, PipelineTimesDataParallelMatchesDdp) {
  const auto ddp = run_train(kShortMlp + "--batch-size=32 --strategy=ddp");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  const std::string reference = last_json_line(ddp.output);
  for (const char* dp : {"ddp", "zero1", "zero2"}) {
    const auto pp = run_train(
        kShortMlp + "--batch-size=32 --strategy=pipeline --stages=2 --dp-strategy=" + dp, 4);
    ASSERT_EQ(pp.exit_code, 0) << pp.output;
    const std::string s = last_json_line(pp.output);
    EXPECT_EQ(json_number(s, "world_size"), 4) << s;
    EXPECT_NEAR(json_number(s, "train_loss"), json_number(reference, "train_loss"), 1e-4) << s;
    EXPECT_NEAR(json_number(s, "test_accuracy"), json_number(reference, "test_accuracy"), 0.002)
        << s;
    EXPECT_EQ(json_field(json_field(s, "pipeline"), "dp_strategy"), std::string("\"") + dp + "\"");
  }
}

TEST(TrainPipeline, PipelineCheckpointsCarryTheOptimizerStateBothWays) {
  const std::string base = "--model=mlp --train-limit=2000 --threads=1 --seed=3 ";
  const auto whole = run_train_single(base + "--epochs=2");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const double expected = json_number(last_json_line(whole.output), "train_loss");

  const std::string from_pipeline = temp_path("pipeline_ckpt");
  const auto first =
      run_train(base + "--epochs=1 --strategy=pipeline --checkpoint-dir=" + from_pipeline);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second =
      run_train_single(base + "--epochs=2 --resume=" + from_pipeline);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(second.output.find("the optimizer starts fresh"), std::string::npos) << second.output;
  EXPECT_NEAR(json_number(last_json_line(second.output), "train_loss"), expected, 1e-4)
      << second.output;

  const std::string from_single = temp_path("single_ckpt");
  const auto third = run_train_single(base + "--epochs=1 --checkpoint-dir=" + from_single);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  const auto fourth = run_train(base + "--epochs=2 --strategy=pipeline --resume=" + from_single);
  ASSERT_EQ(fourth.exit_code, 0) << fourth.output;
  EXPECT_EQ(fourth.output.find("the optimizer starts fresh"), std::string::npos) << fourth.output;
  EXPECT_NEAR(json_number(last_json_line(fourth.output), "train_loss"), expected, 1e-4)
      << fourth.output;
}

// Pipeline options that cannot work on 2 ranks: code 2 on every rank, the flag named, no hang.
TEST(TrainPipeline, BadPipelineFlagsExitWithTwo) {
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
    const auto r = run_train(
        "--model=mlp --data=synthetic --synthetic-size=256 --threads=1 --strategy=pipeline " +
        std::string(c.flags));
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
  }
}

// --trace: rank 0 writes the last training step of every stage (one process per rank, its
// actions on its compute track, tid 0) as a Chrome trace, each with M forwards and M backwards.
TEST(TrainPipeline, PipelineTraceHasEveryStagesMicroBatches) {
  const std::string file = temp_path("pipeline_trace.json");
  const auto r = run_train(kShortMlp + "--strategy=pipeline --micro-batches=4 --trace=" + file);
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
