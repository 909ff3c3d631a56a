// A GPT pipeline's checkpoint (gpt-tiny, 2 stages, AdamW with GPT-2's two parameter groups):
// the whole model and its optimizer state, gathered from the stages, equal one process's after
// the same 2 steps, key for key: the tied weight once (its owner's), the state numbered as the
// one process's optimizer numbers it (its decay group first), the groups' options in its
// groups (the last stage, ln_f and lm_head, has no decayed weight: its only group is the whole
// model's second). Loaded into a fresh model (another seed) and a pipeline of another schedule,
// it trains on as the one process does, both copies of the weight restored and equal.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/environment.h"
#include "pipeline/optimizer_state.h"
#include "tests/pipeline/gpt_reference.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int kMicrobatches = 4;
constexpr int64_t kRows = 8;

// GPT-2's groups (models::weight_decay_groups) of `params`, in their order: the Linear weights
// decayed, the rest not; a group `params` has nothing of is left out.
std::unique_ptr<optim::AdamW> grouped_adamw(const std::vector<Variable>& params, nn::Module& model) {
  const auto [decayed, spared] = models::weight_decay_groups(model, params);
  std::vector<optim::ParamGroup> groups;
  if (!decayed.empty()) groups.emplace_back(decayed, adamw_options().clone());
  if (!spared.empty()) groups.emplace_back(spared, optim::AdamWOptions(kLr).weight_decay(0).clone());
  return std::make_unique<optim::AdamW>(std::move(groups), adamw_options());
}

void step(Pipe& pipe, optim::Optimizer& opt, int step) {
  const TokenBatch b = token_batch(step, kRows);
  opt.zero_grad();
  pipe.train_step(b.x, b.y);
  opt.step();
}

void reference_step(nn::Sequential& model, optim::Optimizer& opt, int step) {
  opt.zero_grad();
  reference_backward(model, token_batch(step, kRows), kMicrobatches);
  opt.step();
}

void expect_state_equal(const StateDict& got, const StateDict& want, double tol, double lr_steps) {
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [key, w] : want) {
    ASSERT_TRUE(got.contains(key)) << key;
    const Tensor g = got.at(key);
    ASSERT_EQ(g.shape(), w.shape()) << key;
    EXPECT_EQ(g.dtype(), w.dtype()) << key;
    expect_close(key, g.to(kF64), w.to(kF64), tol, lr_steps);
  }
}

TEST(PipeGPTCheckpoint, GatheredStateIsOneProcessesAndResumesExactlyAsIt) {
  auto world = dist::world();
  if (world->size() != 2) GTEST_SKIP() << "the groups of each stage are written for 2 stages";
  auto reference = tiny_gpt();
  auto ref_opt = grouped_adamw(reference->parameters(), *reference);
  auto model = tiny_gpt();
  Pipe pipe(model, world, gpt_loss, gpt_options("1f1b", kMicrobatches));
  auto opt = grouped_adamw(pipe.parameters(), *model);
  EXPECT_EQ(opt->param_groups().size(), pipe.stage() == 0 ? 2u : 1u);
  for (int s = 0; s < 2; ++s) {
    reference_step(*reference, *ref_opt, s);
    step(pipe, *opt, s);
  }

  // The checkpoint: the model as one process holds it (wte once), the optimizer numbered as its.
  pipe.gather_model();
  const StateDict model_state = model->state_dict();
  const ParameterGroups model_groups = parameter_groups(*grouped_adamw(model->parameters(), *model));
  const StateDict optimizer_state =
      gather_optimizer_state(pipe, opt->state_dict(), parameter_groups(*opt), model_groups);
  expect_state_equal(model_state, reference->state_dict(), 1e-6, 2 * kLr);
  expect_state_equal(optimizer_state, ref_opt->state_dict(), 1e-6, 2 * kLr);

  // Resumed into a model of another seed, on another schedule.
  manual_seed(99);
  auto resumed = models::GPT(models::GPTConfig::tiny());
  resumed->load_state_dict(model_state);
  Pipe again(resumed, world, gpt_loss, gpt_options("zb-h1", kMicrobatches));
  auto opt2 = grouped_adamw(again.parameters(), *resumed);
  opt2->load_state_dict(slice_optimizer_state(again, optimizer_state, parameter_groups(*opt2),
                                              parameter_groups(*grouped_adamw(resumed->parameters(), *resumed))));
  for (int s = 2; s < 4; ++s) {
    reference_step(*reference, *ref_opt, s);
    step(again, *opt2, s);
  }
  // The last stage's copy of the weight was restored with its optimizer state: it took the
  // owner's steps, bit for bit.
  Tensor copy = again.tied_parameters().at(0).variable.data().clone();
  world->broadcast(copy.view({copy.numel()}), 1)->wait();
  EXPECT_EQ(max_abs_diff(copy, again.tied_parameters().at(0).variable.data()), 0);
  again.gather_model();
  expect_state_equal(resumed->state_dict(), reference->state_dict(), 1e-6, 4 * kLr);
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
