// Model-state bytes per rank for a tiny model, written out by hand from the ZeRO paper's table.
#include "cost/memory.h"

#include <gtest/gtest.h>

#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

struct Expected {
  const char* strategy;
  int64_t parameters, gradients, optimizer;
};

void expect_rows(const std::vector<MemoryRow>& rows, const std::vector<Expected>& expected) {
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].strategy);
    EXPECT_EQ(rows[i].strategy, expected[i].strategy);
    EXPECT_EQ(rows[i].bytes.parameters, expected[i].parameters);
    EXPECT_EQ(rows[i].bytes.gradients, expected[i].gradients);
    EXPECT_EQ(rows[i].bytes.optimizer, expected[i].optimizer);
  }
}

TEST(Memory, MixedPrecisionAdamIsThePapersTable) {
  // psi = 1000, N = 4, K_s = 2 stages, T = 2 with 600 split parameters (400 + 300 held).
  const TrainingSetup mixed_adam{Precision::kMixed, OptimizerKind::kAdam};
  EXPECT_EQ(mixed_adam.optimizer_bytes(), 12);
  const auto rows = memory_per_rank(1000, 600, 0, mixed_adam, 4, 2, 2);
  expect_rows(rows, {{"ddp", 2000, 2000, 12000},
                     {"zero1", 2000, 2000, 3000},
                     {"zero2", 2000, 1000, 3000},
                     {"zero3", 1000, 1000, 2000},
                     {"pipeline", 1000, 1000, 6000},
                     {"tensor_parallel", 1400, 1400, 8400}});
  EXPECT_EQ(rows[0].formula, "(2 + 2 + 12) psi");
  EXPECT_EQ(rows[3].formula, "(4 + 4 + 8) psi/N");
  EXPECT_EQ(rows[0].bytes.total(), 16000);
  EXPECT_EQ(rows[3].bytes.total(), 4000);  // 16 psi / N
}

TEST(Memory, F32Sgd) {
  const TrainingSetup f32_sgd{Precision::kF32, OptimizerKind::kSGD};
  const auto rows = memory_per_rank(1000, 0, 0, f32_sgd, 4, 4, 2);
  expect_rows(rows, {{"ddp", 4000, 4000, 4000},
                     {"zero1", 4000, 4000, 2000},
                     {"zero2", 4000, 1000, 2000},
                     {"zero3", 1000, 1000, 1000},
                     {"pipeline", 1000, 1000, 1000},
                     {"tensor_parallel", 4000, 4000, 4000}});
}

// A GPT's wte, read by the embedding and the tied lm_head: a pipeline of K > 1 stages holds it
// twice, one stage once. psi = 1000 of which 600 tied, f32 Adam (4 + 4 + 8).
TEST(Memory, PipelineStagesHoldACopyOfTiedParameters) {
  const TrainingSetup f32_adam{Precision::kF32, OptimizerKind::kAdam};
  const auto two = memory_per_rank(1000, 0, 600, f32_adam, 2, 2, 1);
  EXPECT_EQ(two[4].strategy, "pipeline");
  EXPECT_EQ(two[4].bytes.parameters, 4 * (1000 + 600) / 2);
  EXPECT_EQ(two[4].bytes.optimizer, 8 * (1000 + 600) / 2);
  EXPECT_EQ(two[4].formula, "(4 + 4 + 8) (psi + psi_t)/K");
  const auto one = memory_per_rank(1000, 0, 600, f32_adam, 1, 1, 1);
  EXPECT_EQ(one[4].bytes.parameters, 4 * 1000);
  EXPECT_EQ(one[4].formula, "(4 + 4 + 8) psi/K");
  const MemoryRow stage = pipeline_stage_row(700, f32_adam, 2);
  EXPECT_EQ(stage.bytes.parameters, 4 * 700);
  EXPECT_EQ(stage.bytes.gradients, 4 * 700);
  EXPECT_EQ(stage.bytes.optimizer, 8 * 700);
  EXPECT_EQ(stage.formula, "(4 + 4 + 8) psi_k");
}

// The ZeRO paper's own example (Rajbhandari et al. 2020, figure 1): 7.5B parameters on 64 GPUs,
// mixed-precision Adam (K = 12): 120 GB, 31.4 GB, 16.6 GB and 1.9 GB per device.
TEST(Memory, ThePapersSevenAndAHalfBillionOnSixtyFour) {
  const TrainingSetup mixed_adam{Precision::kMixed, OptimizerKind::kAdam};
  const int64_t psi = 7500000000;
  const auto rows = paper_memory_per_rank(psi, mixed_adam, 64, 4);
  expect_rows(rows, {{"ddp", 2 * psi, 2 * psi, 12 * psi},
                     {"zero1", 2 * psi, 2 * psi, 12 * psi / 64},
                     {"zero2", 2 * psi, 2 * psi / 64, 12 * psi / 64},
                     {"zero3", 2 * psi / 64, 2 * psi / 64, 12 * psi / 64},
                     {"pipeline", 2 * psi / 4, 2 * psi / 4, 12 * psi / 4}});
  const double paper_gb[] = {120, 31.4, 16.6, 1.9};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(rows[i].bytes.total() / 1e9, paper_gb[i], 0.05) << rows[i].strategy;
  }
  EXPECT_EQ(rows[2].formula, "2 psi + (2 + 12) psi/N");
  // tessera's ZeRO-2 keeps f32 shard gradients: 2 psi/N more than the paper's.
  const auto ours = memory_per_rank(psi, 0, 0, mixed_adam, 64, 4, 1);
  EXPECT_EQ(ours[2].bytes.total() - rows[2].bytes.total(), 2 * psi / 64);
  EXPECT_EQ(ours[0].bytes.total(), rows[0].bytes.total());
  EXPECT_EQ(ours[3].bytes.total(), rows[3].bytes.total());
}

TEST(Memory, ThePapersTableRoundsShardsUp) {
  const auto rows = paper_memory_per_rank(10, TrainingSetup{}, 3, 1);  // f32 Adam: 4 + 4 + 8
  EXPECT_EQ(rows[3].bytes.parameters, 14);  // 40 bytes over 3 ranks
  EXPECT_EQ(rows[3].bytes.optimizer, 27);   // 80 over 3
  testing::expect_error([] { paper_memory_per_rank(0, TrainingSetup{}, 4, 1); }, "psi must be >= 1, got 0");
}

TEST(Memory, ErrorsNameTheValues) {
  testing::expect_error([] { memory_per_rank(10, 0, 0, TrainingSetup{}, 0, 1, 1); }, "ranks 0");
  testing::expect_error([] { memory_per_rank(10, 0, 11, TrainingSetup{}, 2, 2, 1); }, "11 tied parameters of 10");
  testing::expect_error([] { parse_precision("f16"); }, "unknown precision 'f16'");
  testing::expect_error([] { parse_optimizer("lamb"); }, "unknown optimizer 'lamb'");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
