// The train tool on 2 ranks under mpirun: DDP and ZeRO-1 both learn, report world_size 2, send
// the ring all-reduce's bytes per step, and ZeRO-1 holds half the optimizer state per rank.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string g_runner, g_train;

struct Result {
  int exit_code;
  std::string output;
};

Result run(const std::string& flags) {
  const std::string command = g_runner + " 2 " + g_train + " " + flags + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string summary(const std::string& s) {
  const size_t at = s.rfind("{\"model\"");
  return at == std::string::npos ? "" : s.substr(at, s.find('\n', at) - at);
}

double number(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  return at == std::string::npos ? -1 : std::atof(json.c_str() + at + key.size() + 4);
}

std::string field(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 4;
  return json.substr(start, json.find_first_of(",}", json[start] == '[' ? json.find(']', start) : start) - start);
}

TEST(TrainDistributed, DdpAndZero1Learn) {
  // logistic regression: 7850 f32 parameters; a 2-rank ring all-reduce sends 2 * 1/2 of them.
  const int64_t ring_bytes = 7850 * 4;
  for (const char* strategy : {"ddp", "zero1"}) {
    const Result r = run(std::string("--model=logistic --train-limit=4000 --epochs=2 --threads=1 --strategy=") +
                         strategy);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string s = summary(r.output);
    ASSERT_FALSE(s.empty()) << r.output;
    EXPECT_EQ(number(s, "world_size"), 2) << s;
    EXPECT_GT(number(s, "test_accuracy"), 0.75) << s;
    EXPECT_EQ(number(s, "comm_bytes_per_step"), ring_bytes) << s;
    EXPECT_EQ(field(s, "strategy"), std::string("\"") + strategy + "\"");
    // Adam holds two f32 moments: 62,800 bytes unsharded, half of that per ZeRO-1 rank.
    EXPECT_EQ(field(s, "optimizer_state_bytes_per_rank"),
              std::string(strategy) == "zero1" ? "[31400, 31400]" : "[62800, 62800]")
        << s;
  }
}

TEST(TrainDistributed, BadFlagOnEveryRankExitsWithTwo) {
  const Result r = run("--strategy=zero9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--strategy must be one of single|ddp|zero1"), std::string::npos) << r.output;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: train_distributed_test MPI_RUN TRAIN\n");
    return 2;
  }
  g_runner = argv[1];
  g_train = argv[2];
  return RUN_ALL_TESTS();
}
