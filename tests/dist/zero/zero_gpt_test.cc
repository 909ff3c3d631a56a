// The GPT (models::GPT, gpt-tiny: 2 blocks, width 32, byte vocabulary) under ZeRO-1, 2 and 3
// with GPT-2's recipe, on 2 ranks, against one process on the whole batch: AdamW with betas
// (0.9, 0.95) over models::weight_decay_groups (the Linear weights decayed at 0.1; the biases,
// LayerNorms and embeddings not), in f32. ZeRO-3 keeps the tied token embedding in its root unit
// (lm_head reads it, nn::Module::register_tied_parameter); ZeRO-1/2/3 cut their shards by the
// groups. After 4 steps the parameters equal the one process's (and DDP's, which averages as
// ZeRO does, more closely still); the gathered optimizer state is
// the one process's key by key (numbered in the groups' order); each resumes from the one
// process's checkpoint and from its own sharded one as the uninterrupted runs continue.
#include <gtest/gtest.h>

#include <cstdio>

#include "models/gpt.h"
#include "optim/adam.h"
#include "tensor/random.h"
#include "tests/dist/zero/grouped_trainer.h"

namespace tessera {
namespace dist {
namespace grouped_test {
namespace {

constexpr int64_t kPerRank = 2, kTime = 16;
// f32 and Adam on parameters near 1 (the LayerNorms): the whole batch's mean against the ranks'
// averaged means differ by ~20 ulps after 4 steps. Against DDP, which averages as ZeRO does,
// the sharded runs are equal to a few ulps.
constexpr double kTolerance = 1e-5, kDdpTolerance = 1e-6;

optim::AdamOptions recipe(double weight_decay) {
  return optim::AdamOptions(1e-3).betas({0.9, 0.95}).weight_decay(weight_decay);
}

Recipe gpt_setup() {
  Recipe s;
  s.model = [](uint64_t seed) {
    manual_seed(4 + seed);
    return models::GPT(models::GPTConfig::tiny());
  };
  s.groups = [](nn::Module& model) {
    const auto [decay, no_decay] = models::weight_decay_groups(model);
    std::vector<optim::ParamGroup> groups;
    groups.emplace_back(decay, recipe(0.1).clone());
    groups.emplace_back(no_decay, recipe(0.0).clone());
    return groups;
  };
  s.optimizer = zero::grouped_factory<optim::AdamW>(recipe(0.1));
  s.units = FullyShardedOptions().min_num_params(1);  // embed, h0, h1, ln_f; root: wte
  s.batch = [](int step, int world) {
    Generator g(40 + step);
    const Tensor tokens = mul(rand({kPerRank * world, kTime + 1}, kF32, &g), 255.99).to(kI64);
    return std::make_pair(tokens.narrow(1, 0, kTime).contiguous(), tokens.narrow(1, 1, kTime).contiguous());
  };
  s.loss = models::lm_loss;
  return s;
}

class ZeroGpt : public ::testing::TestWithParam<int> {};

TEST_P(ZeroGpt, EqualsOneProcessWithGpt2sRecipe) {
  const Recipe setup = gpt_setup();
  Trainer one(setup, 0, 1), sharded(setup, GetParam(), 1);
  if (sharded.fsdp) {
    // The tied token embedding is the root's, which spans embed .. lm_head.
    const FlatParameter& root = *sharded.fsdp->units().back();
    EXPECT_EQ(root.name(), "root");
    ASSERT_EQ(root.params().size(), 1u);
    EXPECT_EQ(root.params()[0].first, "embed.wte.weight");
    EXPECT_EQ(sharded.fsdp->unit_children().back(), (std::vector<size_t>{0, 4}));
  }
  Trainer ddp(setup, kDdp, 1);
  one.train(0, 4);
  ddp.train(0, 4);
  sharded.train(0, 4);
  const StateDict model = sharded.model_state(), state = sharded.optimizer_state();
  const double from_one = largest_difference(one.model_state(), model, "parameters");
  const double state_from_one = largest_difference(one.optimizer_state(), state, "state");
  const double from_ddp = largest_difference(ddp.model_state(), model, "parameters (DDP)");
  if (dist::world()->rank() == 0) {
    std::printf("gpt-tiny under ZeRO-%d on %d ranks, 4 AdamW steps over GPT-2's groups: largest "
                "difference from one process %.3g (parameters), %.3g (optimizer state); from "
                "DDP %.3g\n", GetParam(), dist::world()->size(), from_one, state_from_one, from_ddp);
  }
  EXPECT_LT(from_one, kTolerance);
  EXPECT_LT(state_from_one, kTolerance);
  EXPECT_LT(from_ddp, kDdpTolerance);
}

TEST_P(ZeroGpt, ResumesAcrossOneProcessAndItsOwnShardedCheckpoint) {
  resumes_across_one_process_and_shards(gpt_setup(), GetParam(), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroGpt, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace grouped_test
}  // namespace dist
}  // namespace tessera
