// The train tool's "memory" report: this rank's model states (parameters, gradients, optimizer
// state) measured right after a backward equal the ZeRO paper's prediction
// (dist/zero/memory_model.h) for one process, DDP and ZeRO stages 1, 2 and 3, on 2 and 4 ranks,
// with Adam in f32 and f16 (the paper's 16 and 4 + 12/N bytes per parameter) and with
// SGD+momentum on bf16 parameters. The issue allows 5%; the figures
// agree to the byte but for ZeRO-3's padding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/tools/train_runner.h"

namespace {

using tessera::testing::json_field;
using tessera::testing::json_number;
using tessera::testing::last_json_line;

struct Case {
  const char* strategy;
  int ranks;
  const char* flags;
};

TEST(TrainMemory, ModelStatesMeasuredEqualThePrediction) {
  const std::string common = "--model=mlp --train-limit=640 --epochs=1 --threads=1 --seed=3 ";
  // MLP(784, 256, 10): psi = 203,530.
  const double psi = 203530;
  double zero3_params = 0;
  for (const Case& c : {Case{"single", 1, ""}, Case{"ddp", 2, ""}, Case{"zero1", 2, ""},
                        Case{"zero2", 2, ""}, Case{"zero3", 2, ""}, Case{"zero1", 4, ""},
                        Case{"zero2", 4, ""}, Case{"zero3", 4, ""},
                        Case{"ddp", 2, "--param-dtype=bf16 --optimizer=sgd "},
                        Case{"zero2", 2, "--param-dtype=bf16 --optimizer=sgd "},
                        Case{"zero3", 2, "--param-dtype=bf16 --optimizer=sgd "},
                        Case{"ddp", 2, "--param-dtype=f16 "}, Case{"zero1", 2, "--param-dtype=f16 "}}) {
    const std::string flags = common + c.flags + "--strategy=" + c.strategy;
    const auto r = std::string(c.strategy) == "single"
                       ? tessera::testing::run_train_single(flags)
                       : tessera::testing::run_train(flags, c.ranks);
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    const std::string memory = json_field(last_json_line(r.output), "memory");
    ASSERT_FALSE(memory.empty()) << r.output;
    const double measured = json_number(memory, "model_state");
    const double predicted = json_number(memory, "model_state_predicted");
    EXPECT_GT(measured, 0) << flags << " " << memory;
    EXPECT_LE(std::abs(measured - predicted), 0.05 * predicted) << flags << " " << memory;
    for (const char* part : {"params", "grads", "optimizer"}) {
      EXPECT_LE(std::abs(json_number(memory, part) -
                         json_number(memory, std::string(part) + "_predicted")),
                0.05 * json_number(memory, std::string(part) + "_predicted") + 64)
          << flags << " " << part << " " << memory;
    }
    EXPECT_GT(json_number(memory, "peak"), measured) << memory;
    if (std::string(c.strategy) == "zero3" && c.ranks == 2 && c.flags[0] == '\0') {
      zero3_params = json_number(memory, "params");
    }
    if (std::string(c.strategy) == "ddp" && c.flags[0] == '\0') {
      // Adam in f32: (4 + 4 + 8) psi.
      EXPECT_EQ(measured, 16 * psi) << memory;
    }
    if (std::string(c.flags) == "--param-dtype=f16 ") {
      // The ZeRO paper's mixed-precision Adam: 16 bytes per parameter under DDP, 4 + 12 / N under
      // ZeRO-1 (measured once the loss scaler has let a step through).
      EXPECT_EQ(measured, (std::string(c.strategy) == "ddp" ? 16 : 4 + 12 / 2) * psi) << memory;
    }
  }
  // ZeRO-3 on 2 ranks holds half the f32 parameters (padding aside).
  EXPECT_NEAR(zero3_params, 4 * psi / 2, 64);
}

// "per_rank": every rank's model states, not rank 0's only. A 2-stage pipeline's ranks hold
// different parts of the MLP (stage 0: Flatten, Linear(784, 256), ReLU = 200,960 parameters;
// stage 1: Linear(256, 10) = 2,570), Adam in f32 on each: 16 bytes per parameter. ZeRO-2 on 3
// ranks: every rank holds all parameters and a third of the gradients and optimizer state.
TEST(TrainMemory, EveryRanksModelStatesAreInTheJson) {
  const std::string common = "--model=mlp --train-limit=640 --epochs=1 --threads=1 --seed=3 ";
  const auto pipe = tessera::testing::run_train(common + "--strategy=pipeline", 2);
  ASSERT_EQ(pipe.exit_code, 0) << pipe.output;
  const std::string memory = json_field(last_json_line(pipe.output), "memory");
  const std::string ranks = json_field(memory, "per_rank");
  long long rank[2], params[2], grads[2], optimizer[2], state[2];
  ASSERT_EQ(std::sscanf(ranks.c_str(),
                        "[{\"rank\": %lld, \"params\": %lld, \"grads\": %lld, \"optimizer\": %lld, "
                        "\"model_state\": %lld, %*[^}]}, {\"rank\": %lld, \"params\": %lld, "
                        "\"grads\": %lld, \"optimizer\": %lld, \"model_state\": %lld",
                        &rank[0], &params[0], &grads[0], &optimizer[0], &state[0], &rank[1],
                        &params[1], &grads[1], &optimizer[1], &state[1]), 10) << ranks;
  EXPECT_EQ(rank[0], 0);
  EXPECT_EQ(rank[1], 1);
  EXPECT_EQ(state[0], 16 * 200960) << ranks;
  EXPECT_EQ(state[1], 16 * 2570) << ranks;
  EXPECT_EQ(params[1], 4 * 2570) << ranks;
  const auto zero2 = tessera::testing::run_train(common + "--strategy=zero2", 3);
  ASSERT_EQ(zero2.exit_code, 0) << zero2.output;
  const std::string z = json_field(json_field(last_json_line(zero2.output), "memory"), "per_rank");
  double total = 0;
  for (int r = 0; r < 3; ++r) {
    const std::string key = "{\"rank\": " + std::to_string(r) + ", ";
    const size_t at = z.find(key);
    ASSERT_NE(at, std::string::npos) << z;
    const std::string one = z.substr(at, z.find('}', at) - at + 1);
    EXPECT_EQ(json_number(one, "params"), 4 * 203530) << one;
    total += json_number(one, "grads") + json_number(one, "optimizer");
  }
  // The shards add up to the whole: per parameter 4 bytes of gradient and 12 of optimizer state
  // (Adam's two moments and the shard's f32 flat copy the optimizer steps, as the prediction
  // above counts it), each shard padded by at most a few elements.
  EXPECT_NEAR(total, 16 * 203530, 64) << z;
}

// --offload=optimizer: the Adam moments (and ZeRO-1/2's f32 shard) are on disk between steps,
// so the optimizer state measured after a backward is 0, as predicted; "offload" reports the
// bytes in the store (Adam in f32: 8 bytes per element of this rank's shard, in whole 4 KiB
// blocks), every step reading and writing all of them; the files are gone after the run.
TEST(TrainMemory, OffloadedOptimizerStateIsReportedAndNotResident) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/train_offload";
  const std::string common = "--model=mlp --train-limit=640 --epochs=1 --threads=1 --seed=3 "
                             "--offload=optimizer --offload-dir=" + dir + " ";
  const double psi = 203530;
  for (const char* strategy : {"zero1", "zero2", "zero3"}) {
    const std::string flags = common + "--strategy=" + strategy;
    const auto r = tessera::testing::run_train(flags, 2);
    ASSERT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    const std::string json = last_json_line(r.output);
    const std::string memory = json_field(json, "memory");
    EXPECT_EQ(json_number(memory, "optimizer"), 0) << flags << " " << memory;
    EXPECT_EQ(json_number(memory, "optimizer_predicted"), 0) << memory;
    EXPECT_EQ(json_number(memory, "model_state"), json_number(memory, "model_state_predicted"))
        << memory;
    const std::string offload = json_field(json, "offload");
    ASSERT_FALSE(offload.empty()) << json;
    const double offloaded = json_number(offload, "offloaded_bytes");
    EXPECT_GE(offloaded, 8 * psi / 2) << offload;
    EXPECT_LE(offloaded, 8 * psi / 2 + 4 * 4096) << offload;
    EXPECT_EQ(json_number(offload, "step_read_bytes"), offloaded) << offload;
    EXPECT_EQ(json_number(offload, "step_written_bytes"), offloaded) << offload;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir;
  }
}

}  // namespace

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
