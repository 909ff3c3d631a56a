// A pipeline's optimizer state in the whole model's format (pipeline/optimizer_state.h): after
// two Adam steps on K = world-size stages, the gathered state equals, key by key, the state of
// one process's Adam over the whole model doing gradient accumulation over the same
// micro-batches; sliced back into fresh optimizers on a pipeline of *another* schedule and
// chunking, training continues exactly as the one process continues. Parameter numbering
// (Pipe::parameter_indices) is checked literally, interleaved chunks included.
#include "pipeline/optimizer_state.h"

#include <gtest/gtest.h>

#include <set>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "optim/adam.h"
#include "pipeline/microbatch.h"
#include "tensor/ops.h"
#include "tests/pipeline/mlp.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int kMicrobatches = 4;

// Flatten, Linear, ReLU, Linear, ReLU, Linear, ReLU, Linear: 8 layers, 8 parameters; every
// part of 4 stages (or 2 stages x 2 chunks) holds a Linear.
std::shared_ptr<nn::Sequential> model() { return mlp_of(31, {12, 20, 20, 16, 6}); }

Variable loss_fn(const Variable& out, const Tensor& y) { return cross_entropy(out, y); }

std::pair<Tensor, Tensor> batch(int step) {
  Generator g(900 + step);
  const Tensor x = randn({16, 12}, kF32, &g);
  return {x, argmax(x.narrow(1, 0, 6), 1)};
}

void reference_step(nn::Sequential& model, optim::Adam& opt, int step) {
  opt.zero_grad();
  const auto [x, y] = batch(step);
  for (const Microbatch& mb : split_microbatches(x, y, kMicrobatches)) {
    (loss_fn(model.forward(Variable(mb.input)), mb.target) * mb.weight).backward();
  }
  opt.step();
}

void pipeline_step(Pipe& pipe, optim::Adam& opt, int step) {
  opt.zero_grad();
  const auto [x, y] = batch(step);
  pipe.train_step(x, y);
  opt.step();
}

PipeOptions options(const std::string& schedule, int chunks) {
  return PipeOptions().microbatches(kMicrobatches).schedule(schedule).chunks_per_rank(chunks);
}

TEST(PipelineOptimizerState, ParameterIndicesNumberTheWholeModel) {
  auto world = dist::world();
  if (world->size() != 2) GTEST_SKIP() << "the literal numbering is written for 2 stages";
  Pipe plain(model(), world, loss_fn, options("1f1b", 1));  // parts: 4 layers each
  Pipe interleaved(model(), world, loss_fn, options("interleaved", 2));  // parts: 2 layers each
  if (world->rank() == 0) {
    EXPECT_EQ(plain.parameter_indices(), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(interleaved.parameter_indices(), (std::vector<int64_t>{0, 1, 4, 5}));
  } else {
    EXPECT_EQ(plain.parameter_indices(), (std::vector<int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(interleaved.parameter_indices(), (std::vector<int64_t>{2, 3, 6, 7}));
  }
}

TEST(PipelineOptimizerState, GatheredEqualsOneProcessAndSlicedContinuesExactly) {
  auto world = dist::world();
  auto reference = model();
  optim::Adam ref_opt(reference->parameters(), optim::AdamOptions(1e-2));
  auto m = model();
  Pipe pipe(m, world, loss_fn, options("1f1b", 1));
  optim::Adam opt(pipe.parameters(), optim::AdamOptions(1e-2));
  for (int step = 0; step < 2; ++step) {
    reference_step(*reference, ref_opt, step);
    pipeline_step(pipe, opt, step);
  }

  const StateDict gathered = gather_optimizer_state(pipe, opt.state_dict());
  const StateDict expected = ref_opt.state_dict();
  std::set<std::string> gathered_keys, expected_keys;
  for (const auto& [key, t] : gathered) gathered_keys.insert(key);
  for (const auto& [key, t] : expected) expected_keys.insert(key);
  EXPECT_EQ(gathered_keys, expected_keys);
  for (const auto& [key, t] : expected) {
    if (!gathered.contains(key)) continue;
    const Tensor& g = gathered.at(key);
    ASSERT_EQ(g.shape(), t.shape()) << key;
    ASSERT_EQ(g.dtype(), t.dtype()) << key;
    EXPECT_LT(max_abs_diff(g.to(kF64), t.to(kF64)), 1e-6) << key;
  }

  // Resume on a pipeline cut differently (interleaved chunks on 2 ranks, 1F1B otherwise): the
  // gathered model and the sliced optimizer state continue as the one process does.
  pipe.gather_model();
  auto resumed_model = model();
  resumed_model->load_state_dict(m->state_dict());
  const bool interleave = world->size() == 2;
  Pipe resumed(resumed_model, world, loss_fn,
               options(interleave ? "interleaved" : "1f1b", interleave ? 2 : 1));
  optim::Adam resumed_opt(resumed.parameters(), optim::AdamOptions(1e-3));  // lr from the state
  resumed_opt.load_state_dict(slice_optimizer_state(resumed, gathered));
  EXPECT_EQ(resumed_opt.param_groups()[0].options->lr(), 1e-2);
  for (int step = 2; step < 4; ++step) {
    reference_step(*reference, ref_opt, step);
    pipeline_step(resumed, resumed_opt, step);
  }
  resumed.gather_model();
  const auto ref_params = reference->named_parameters();
  const auto params = resumed_model->named_parameters();
  ASSERT_EQ(params.size(), ref_params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_LT(max_abs_diff(params[i].second.data(), ref_params[i].second.data()), 1e-5)
        << params[i].first;
  }
}

TEST(PipelineOptimizerState, AMalformedKeyIsNamed) {
  auto world = dist::world();
  Pipe pipe(model(), world, loss_fn, options("1f1b", 1));
  StateDict bad;
  bad.set("state.x.exp_avg", zeros({1}));
  try {
    slice_optimizer_state(pipe, bad);
    FAIL() << "a malformed key was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("malformed key 'state.x.exp_avg'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
