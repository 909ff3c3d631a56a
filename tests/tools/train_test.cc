// The train tool end to end: a short real training run (logistic regression on 4,000
// Fashion-MNIST images passes 0.75 test accuracy in seconds), its output contract, bad flags,
// and resuming from a checkpoint.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/util/test_util.h"

namespace {

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
  std::ifstream in(metrics);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    EXPECT_NE(line.find("\"test_accuracy\""), std::string::npos);
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

// On a GPU the same short run learns as well; without one (or without --config=cuda) the tool
// ends with exit code 1 and the runtime's reason, which the test reports as its skip.
TEST(Train, ShortLogisticRunOnCudaLearnsOrSaysWhyItCannot) {
  const auto r = run("--model=logistic --train-limit=4000 --epochs=2 --device=cuda");
  if (r.exit_code == 1 && (r.output.find("built without CUDA") != std::string::npos ||
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

TEST(Train, ResumesFromACheckpoint) {
  const std::string dir = temp_path("ckpt");
  auto first = run("--model=logistic --train-limit=2000 --epochs=1 --checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = run("--model=logistic --train-limit=2000 --epochs=2 --resume=" + dir +
                      "/last.safetensors");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos);
  EXPECT_EQ(second.output.find("epoch 1/2  train_loss"), std::string::npos);  // epoch 1 skipped
  EXPECT_NE(second.output.find("epoch 2/2  train_loss"), std::string::npos) << second.output;
  auto wrong = run("--model=mlp --epochs=2 --resume=" + dir + "/last.safetensors");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.output.find("load_state_dict"), std::string::npos) << wrong.output;
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
