// Activation recomputation in the GPT's blocks (models::Recompute, autograd/recompute.h):
// every choice gives the loss and the gradients of keeping everything, and keeps the bytes
// cost/activation_memory.h says, read from the counting allocator block by block.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/variable.h"
#include "cost/activation_memory.h"
#include "models/gpt.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace models {
namespace {

struct Case {
  std::string granularity, modules;
};

const std::vector<Case> kCases = {
    {"none", "core_attn"},       {"selective", "core_attn"},
    {"selective", "layernorm"},  {"selective", "gelu"},
    {"selective", "core_attn,layernorm,gelu"}, {"full", "core_attn"},
};

GPTConfig config(const Case& c) {
  GPTConfig config = GPTConfig::tiny();  // 2 layers, 2 heads, 32 wide, vocabulary 256
  config.recompute = Recompute::parse(c.granularity, c.modules);
  return config;
}

// idx [2, 24] and the next tokens, fixed by a seed.
std::pair<Tensor, Tensor> batch() {
  std::vector<int64_t> ids(2 * 25);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7919 + 13) % 256);
  const Tensor tokens = from_vector<int64_t>(ids, {2, 25});
  return {tokens.narrow(1, 0, 24).contiguous(), tokens.narrow(1, 1, 24).contiguous()};
}

struct Result {
  double loss = 0;
  std::vector<Tensor> grads;
};

Result train_step(const Case& c) {
  manual_seed(1);
  auto model = GPT(config(c));
  const auto [idx, targets] = batch();
  Variable loss = lm_loss((*model)(Variable(idx)), targets);
  loss.backward();
  Result r{loss.data().item(), {}};
  for (const Variable& p : model->parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

TEST(GPTRecompute, EveryChoiceGivesTheGradientsOfKeepingEverything) {
  const Result kept = train_step(kCases[0]);
  for (size_t i = 1; i < kCases.size(); ++i) {
    SCOPED_TRACE(kCases[i].granularity + " " + kCases[i].modules);
    const Result r = train_step(kCases[i]);
    EXPECT_EQ(r.loss, kept.loss);  // the same forward, op for op
    ASSERT_EQ(r.grads.size(), kept.grads.size());
    for (size_t p = 0; p < r.grads.size(); ++p) {
      ASSERT_TRUE(r.grads[p].defined()) << "parameter " << p;
      EXPECT_LE(max_abs_diff(r.grads[p], kept.grads[p]),
                1e-6 * (1e-3 + amax(abs(kept.grads[p])).item()))
          << "parameter " << p;
    }
  }
}

TEST(GPTRecompute, EachBlockKeepsWhatTheFormulaSays) {
  const auto [idx, targets] = batch();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.granularity + " " + c.modules);
    manual_seed(1);
    auto model = GPT(config(c));
    const auto rows = cost::gpt_activations(config(c), 2, 24, cost::Precision::kF32);
    Variable x(idx);
    const Device cpu = Device::cpu();
    for (size_t i = 0; i + 2 < model->size(); ++i) {  // embed and the blocks, ln_f
      const int64_t before = memory_stats(cpu).current_bytes;
      x = (*(*model)[i])(x);
      EXPECT_EQ(memory_stats(cpu).current_bytes - before, rows[i].bytes) << rows[i].layer;
    }
    // Backward still works with the bytes freed: the loss's gradient reaches wte.
    lm_loss((*model)[model->size() - 1]->forward(x), targets).backward();
    EXPECT_TRUE(model->parameters()[0].grad().defined());
  }
}

}  // namespace
}  // namespace models
}  // namespace tessera
