// A GPT's activation bytes per layer (cost/activation_memory.h) against the figures worked out
// by hand for GPT-2 124M; tools/explain's memory test checks them against the counting allocator.
#include "cost/activation_memory.h"

#include <gtest/gtest.h>

#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

TEST(ActivationMemory, Gpt2AtItsFullContext) {
  // b = 4, s = 1024, h = 768, a = 12, V = 50304: s b h = 3,145,728 elements.
  const auto rows = gpt_activations(models::GPTConfig::gpt2(), 4, 1024, Precision::kF32);
  ASSERT_EQ(rows.size(), 16u);  // embed, 12 blocks, ln_f, lm_head, loss
  EXPECT_EQ(rows[0].layer, "embed");
  EXPECT_EQ(rows[0].bytes, 12582912 + 8192);  // 4 x 3,145,728 + 8 x 1024 positions
  // 17 x 3,145,728 x 4 + 16 x 4096 + 4 x 12 x 4096
  EXPECT_EQ(rows[1].bytes, 213909504 + 65536 + 196608);
  EXPECT_EQ(rows[1].formula, "68 sbh + 16 sb + 4 asb");
  // Korthikanti: 3,145,728 x (34 + 5 x 12 x 1024 / 768) = 3,145,728 x 114
  EXPECT_DOUBLE_EQ(rows[1].paper_bytes, 358612992.0);
  EXPECT_EQ(rows[13].layer, "ln_f");
  EXPECT_EQ(rows[14].bytes, 4096LL * 50304 * 4);  // the logits
  EXPECT_EQ(rows[15].bytes, 4096LL * 50304 * 4 + 8 * 4096 + 4);
  EXPECT_LT(rows[0].paper_bytes, 0);  // the paper's figure is per transformer layer
}

TEST(ActivationMemory, MixedPrecisionHalvesTheActivationsNotTheStatistics) {
  const auto f32 = gpt_activations(models::GPTConfig::nano(), 2, 64, Precision::kF32);
  const auto mixed = gpt_activations(models::GPTConfig::nano(), 2, 64, Precision::kMixed);
  const int64_t sb = 128, sbh = sb * 128, statistics = 16 * sb + 4 * 4 * sb;
  EXPECT_EQ(f32[1].bytes - statistics, 2 * (mixed[1].bytes - statistics));
  EXPECT_EQ(mixed[1].bytes, 34 * sbh + statistics);
  EXPECT_EQ(mixed[1].formula, "34 sbh + 16 sb + 4 asb");
}

// Recomputation (models::Recompute) at GPT-2's b = 4, s = 1024: sbh = 3,145,728, sb = 4096,
// asb = 49,152, in f32.
TEST(ActivationMemory, RecomputationKeepsLessPerBlock) {
  auto block = [](const std::string& granularity, const std::string& modules) {
    models::GPTConfig c = models::GPTConfig::gpt2();
    c.recompute = models::Recompute::parse(granularity, modules);
    return gpt_activations(c, 4, 1024, Precision::kF32)[1];
  };
  const int64_t sbh = 3145728, sb = 4096, asb = 49152;
  EXPECT_EQ(block("none", "core_attn").bytes, 17 * 4 * sbh + 16 * sb + 4 * asb);
  // core_attn: qkv 3 kept for q, k, v 3, the output twice and the logsumexp.
  const ActivationRow core = block("selective", "core_attn");
  EXPECT_EQ(core.bytes, 15 * 4 * sbh + 16 * sb);
  EXPECT_EQ(core.formula, "60 sbh + 16 sb");
  EXPECT_DOUBLE_EQ(core.paper_bytes, 34.0 * sbh);  // the 5 a s / h term gone
  EXPECT_EQ(block("selective", "layernorm").bytes, 15 * 4 * sbh + 4 * asb);
  EXPECT_EQ(block("selective", "gelu").bytes, 13 * 4 * sbh + 16 * sb + 4 * asb);
  EXPECT_EQ(block("selective", "core_attn,layernorm,gelu").bytes, 9 * 4 * sbh);
  const ActivationRow full = block("full", "core_attn");
  EXPECT_EQ(full.bytes, 4 * sbh);
  EXPECT_EQ(full.formula, "4 sbh");
  EXPECT_DOUBLE_EQ(full.paper_bytes, 2.0 * sbh);
}

TEST(ActivationMemory, ErrorsNameTheValues) {
  testing::expect_error([] { gpt_activations(models::GPTConfig::nano(), 1, 257, Precision::kF32); },
                        "batch 1 and 257 tokens (context 256)");
  testing::expect_error([] { models::Recompute::parse("some"); },
                        "'some' is not none, selective or full");
  testing::expect_error([] { models::Recompute::parse("selective", "core_attn,mlp"); },
                        "module 'mlp' in 'core_attn,mlp' is not core_attn, layernorm or gelu");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
