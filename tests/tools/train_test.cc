// The train tool end to end: a short real training run (logistic regression on 4,000
// Fashion-MNIST images passes 0.75 test accuracy in seconds), its output contract, bad flags,
// and resuming from a checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

std::string g_train;  // path of the train binary, from argv

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr
};

Result run(const std::string& flags) {
  const std::string command = g_train + " " + flags + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string last_line(const std::string& s) {
  const size_t end = s.find_last_not_of('\n');
  const size_t start = s.rfind('\n', end);
  return s.substr(start == std::string::npos ? 0 : start + 1, end - start);
}

double json_number(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::atof(json.c_str() + at + key.size() + 4);
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(Train, ShortLogisticRunLearnsFashionMnist) {
  const std::string metrics = temp_path("metrics.jsonl");
  const Result r = run("--model=logistic --train-limit=4000 --epochs=2 --threads=2 --metrics=" + metrics);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string summary = last_line(r.output);
  ASSERT_EQ(summary.front(), '{') << summary;
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

TEST(Train, BadFlagsExitWithTwoAndSayWhatWasWrong) {
  Result r = run("--model=logistic --bogus=1");
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
  r = run("--data-dir=/nonexistent");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent"), std::string::npos) << r.output;
}

TEST(Train, ResumesFromACheckpoint) {
  const std::string dir = temp_path("ckpt");
  Result first = run("--model=logistic --train-limit=2000 --epochs=1 --checkpoint-dir=" + dir);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Result second = run("--model=logistic --train-limit=2000 --epochs=2 --resume=" + dir +
                      "/last.safetensors");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos);
  EXPECT_EQ(second.output.find("epoch 1/2  train_loss"), std::string::npos);  // epoch 1 skipped
  EXPECT_NE(second.output.find("epoch 2/2  train_loss"), std::string::npos) << second.output;
  Result wrong = run("--model=mlp --epochs=2 --resume=" + dir + "/last.safetensors");
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
