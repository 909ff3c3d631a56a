// A GPT (gpt-tiny) under a 2-stage pipeline on 2 ranks: its token embedding's weight is read by
// the first stage (embed) and the last (lm_head), so the last keeps a copy and the two sum their
// gradients after each batch (pipeline/tied_parameters.h). Against one process doing gradient
// accumulation over the same micro-batches: every schedule (GPipe, 1F1B, interleaved, ZB-H1,
// ZB-H2) after 3 AdamW steps, the copies bit for bit equal to each other; the gradients each
// stage holds after train_step (the tied weight's the sum of both uses, on both stages);
// gradient clipping counting the weight once; an overflow in one copy's gradient seen by the
// other's loss scaler; bf16 autocast. A pipeline of one stage holds both uses and exchanges
// nothing. The GPT's lm_head registers its tie, so it needs no declaration; a use neither
// registered nor declared is refused on both ranks after the first batch.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "dist/environment.h"
#include "dist/grad_norm.h"
#include "optim/clip_grad.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "optim/grad_scaler.h"
#include "tests/pipeline/gpt_reference.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int kMicrobatches = 4;
constexpr int64_t kRows = 8;

// f must throw an Error naming every one of `parts` (f runs once: it may be collective).
void expect_error_naming(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

// Rank 0's copy of the tied weight on every rank of `group`.
Tensor owners_value(const Pipe& pipe, dist::ProcessGroup& group) {
  Tensor wte = pipe.tied_parameters().at(0).variable.data().clone();
  group.broadcast(wte.view({wte.numel()}), 0)->wait();
  return wte;
}

// Compared parameters summed over the pipeline: the model's, and the last stage's copy.
void expect_every_parameter_compared(int compared, const nn::Sequential& reference,
                                     dist::ProcessGroup& group) {
  Tensor total = scalar_tensor(compared, kI64).reshape({1});
  group.all_reduce(total)->wait();
  EXPECT_EQ(total.item(), static_cast<double>(reference.parameters().size() + 1));
}

void pipeline_matches_accumulation(const std::string& schedule) {
  SCOPED_TRACE(schedule);
  auto world = dist::world();
  auto reference = tiny_gpt();
  optim::AdamW ref_opt(reference->parameters(), adamw_options());
  Pipe pipe(tiny_gpt(), world, gpt_loss, gpt_options(schedule, kMicrobatches));
  ASSERT_EQ(pipe.tied_parameters().size(), 1u);
  EXPECT_EQ(pipe.tied_parameters()[0].name, "embed.wte.weight");
  EXPECT_EQ(pipe.tied_parameters()[0].holders, (std::vector<int>{0, 1}));
  optim::AdamW opt(pipe.parameters(), adamw_options());
  for (int step = 0; step < 3; ++step) {
    const TokenBatch b = token_batch(step, kRows);
    ref_opt.zero_grad();
    const double expected = reference_backward(*reference, b, kMicrobatches);
    ref_opt.step();
    opt.zero_grad();
    const double loss = pipe.train_step(b.x, b.y);
    opt.step();
    EXPECT_NEAR(loss, expected, 1e-6) << "step " << step;
  }
  expect_every_parameter_compared(expect_parameters_match(pipe, *reference, 1e-6, 3 * kLr), *reference, *world);
  // The copy took the same steps as its owner: the same bits.
  const Tensor wte = pipe.tied_parameters()[0].variable.data();
  EXPECT_EQ(max_abs_diff(wte, owners_value(pipe, *world)), 0) << "stage " << pipe.stage();
}

TEST(PipeGPT, GPipeEqualsGradientAccumulation) { pipeline_matches_accumulation("gpipe"); }
TEST(PipeGPT, OneFOneBEqualsGradientAccumulation) { pipeline_matches_accumulation("1f1b"); }
TEST(PipeGPT, InterleavedEqualsGradientAccumulation) { pipeline_matches_accumulation("interleaved"); }
TEST(PipeGPT, ZBH1EqualsGradientAccumulation) { pipeline_matches_accumulation("zb-h1"); }
TEST(PipeGPT, ZBH2EqualsGradientAccumulation) { pipeline_matches_accumulation("zb-h2"); }

TEST(PipeGPT, EachStageHoldsTheWholeModelsGradientOfTheTiedWeight) {
  // After train_step, before any optimizer step: what a loss scaler's inf check and a clip read.
  auto world = dist::world();
  for (const std::string schedule : {"1f1b", "zb-h1"}) {
    SCOPED_TRACE(schedule);
    auto reference = tiny_gpt();
    Pipe pipe(tiny_gpt(), world, gpt_loss, gpt_options(schedule, kMicrobatches));
    const TokenBatch b = token_batch(0, kRows);
    reference_backward(*reference, b, kMicrobatches);
    pipe.train_step(b.x, b.y);
    expect_every_parameter_compared(expect_parameters_match(pipe, *reference, 1e-7, 0, /*grads=*/true),
                                    *reference, *world);
    // Either use alone is not it: the test can fail.
    const Tensor wte_grad = pipe.tied_parameters()[0].variable.grad();
    const Tensor whole = reference->named_parameters().front().second.grad();
    EXPECT_LT(max_abs_diff(wte_grad, whole), 1e-7);
    EXPECT_GT(amax(abs(wte_grad)).item(), 1e-4);
  }
}

TEST(PipeGPT, ClippingCountsTheTiedWeightOnce) {
  auto world = dist::world();
  auto reference = tiny_gpt();
  optim::AdamW ref_opt(reference->parameters(), adamw_options());
  Pipe pipe(tiny_gpt(), world, gpt_loss, gpt_options("1f1b", kMicrobatches));
  optim::AdamW opt(pipe.parameters(), adamw_options());
  const double max_norm = 0.05;  // below the gradients' norm: every step clips
  for (int step = 0; step < 3; ++step) {
    const TokenBatch b = token_batch(step, kRows);
    ref_opt.zero_grad();
    reference_backward(*reference, b, kMicrobatches);
    const double expected = optim::clip_grad_norm(reference->parameters(), max_norm);
    ref_opt.step();
    opt.zero_grad();
    pipe.train_step(b.x, b.y);
    // Counting every held parameter would count the weight on both stages: a larger norm.
    Tensor twice = scalar_tensor(0.0, kF64).reshape({1});
    for (const Variable& p : pipe.parameters()) {
      const Tensor g = p.grad().to(kF64);
      twice.data<double>()[0] += sum(mul(g, g)).item();
    }
    world->all_reduce(twice)->wait();
    const double norm = dist::clip_grad_norm(pipe.parameters(), pipe.owned_parameters(), max_norm, {world});
    EXPECT_NEAR(norm, expected, 1e-6 * expected) << "step " << step;
    EXPECT_GT(std::sqrt(twice.item()), norm * 1.01);
    ASSERT_GT(expected, max_norm);
    opt.step();
  }
  expect_every_parameter_compared(expect_parameters_match(pipe, *reference, 1e-6, 3 * kLr), *reference, *world);
}

TEST(PipeGPT, AnOverflowInOneCopysGradientIsSeenByTheOthersScaler) {
  // Only the last stage's use overflows: its copy's gradient is made inf as it arrives. The
  // first stage's scaler, reducing found_inf over nobody, still skips: it unscales the sum.
  auto world = dist::world();
  Pipe pipe(tiny_gpt(), world, gpt_loss, gpt_options("1f1b", kMicrobatches));
  const Variable& wte = pipe.tied_parameters()[0].variable;
  if (pipe.stage() == 1) {
    wte.register_grad_ready_hook([](Variable& leaf) {
      leaf.set_grad(full(leaf.shape(), std::numeric_limits<double>::infinity(), TensorOptions(leaf.dtype())));
    });
  }
  optim::AdamW opt(pipe.parameters(), adamw_options());
  optim::GradScaler scaler(optim::GradScalerOptions().init_scale(1024));
  const Tensor before = wte.data().clone();
  const TokenBatch b = token_batch(0, kRows);
  pipe.train_step(b.x, b.y);
  EXPECT_FALSE(scaler.step(opt)) << "stage " << pipe.stage();
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 512);
  EXPECT_EQ(max_abs_diff(wte.data(), before), 0);
}

TEST(PipeGPT, UnderBF16AutocastTheCopiesStayEqual) {
  auto world = dist::world();
  auto reference = tiny_gpt();
  optim::AdamW ref_opt(reference->parameters(), adamw_options());
  Pipe pipe(tiny_gpt(), world, gpt_loss, gpt_options("zb-h1", kMicrobatches));
  optim::AdamW opt(pipe.parameters(), adamw_options());
  for (int step = 0; step < 3; ++step) {
    const TokenBatch b = token_batch(step, kRows);
    AutocastGuard bf16(kBF16);
    ref_opt.zero_grad();
    reference_backward(*reference, b, kMicrobatches);
    ref_opt.step();
    opt.zero_grad();
    pipe.train_step(b.x, b.y);
    opt.step();
  }
  // Both round the same micro-batches' products to bf16 alike; only the order of the f32 sums
  // differs (measured: 7e-9).
  expect_every_parameter_compared(expect_parameters_match(pipe, *reference, 1e-6, 3 * kLr), *reference, *world);
  const Tensor wte = pipe.tied_parameters()[0].variable.data();
  EXPECT_EQ(max_abs_diff(wte, owners_value(pipe, *world)), 0);
}

TEST(PipeGPT, OneStageHoldsBothUsesAndExchangesNothing) {
  // Each rank its own pipeline of one stage (new_group is collective: both make both).
  auto world = dist::world();
  std::shared_ptr<dist::ProcessGroup> mine;
  for (int r = 0; r < world->size(); ++r) {
    auto g = dist::new_group({r});
    if (r == world->rank()) mine = g;
  }
  auto reference = tiny_gpt();
  optim::AdamW ref_opt(reference->parameters(), adamw_options());
  Pipe pipe(tiny_gpt(), mine, gpt_loss, gpt_options("1f1b", kMicrobatches));
  EXPECT_TRUE(pipe.tied_parameters().empty());
  EXPECT_EQ(pipe.parameters().size(), reference->parameters().size());
  optim::AdamW opt(pipe.parameters(), adamw_options());
  mine->ledger().reset();
  for (int step = 0; step < 2; ++step) {
    const TokenBatch b = token_batch(step, kRows);
    ref_opt.zero_grad();
    reference_backward(*reference, b, kMicrobatches);
    ref_opt.step();
    opt.zero_grad();
    pipe.train_step(b.x, b.y);
    opt.step();
  }
  EXPECT_EQ(mine->ledger().entry(dist::CollectiveKind::kSendRecv).calls, 0);
  EXPECT_EQ(expect_parameters_match(pipe, *reference, 1e-6, 2 * kLr),
            static_cast<int>(reference->parameters().size()));
}

TEST(PipeGPT, TheRegisteredTieIsFoundWithoutADeclaration) {
  // models::GPT's lm_head registers its use of wte (nn::Module::register_tied_parameter), so the
  // module tree shows it: no tie() needed.
  auto world = dist::world();
  Pipe pipe(tiny_gpt(), world, gpt_loss, PipeOptions().microbatches(kMicrobatches));
  ASSERT_EQ(pipe.tied_parameters().size(), 1u);
  EXPECT_EQ(pipe.tied_parameters()[0].name, "embed.wte.weight");
  EXPECT_EQ(pipe.tied_parameters()[0].holders, (std::vector<int>{0, 1}));
}

// A last layer that reads the first layer's weight without registering it (as models::GPT's
// lm_head did before it registered its tie): nothing in the module tree shows the use.
class UnregisteredTie : public nn::Module {
 public:
  explicit UnregisteredTie(std::shared_ptr<nn::Embedding> wte) : wte_(std::move(wte)) {}
  std::string type_name() const override { return "UnregisteredTie"; }
  Variable forward(const Variable& x) override { return linear(x, wte_->weight(), Variable()); }

 private:
  std::shared_ptr<nn::Embedding> wte_;
};

TEST(PipeGPT, AnUndeclaredUseIsRefusedOnEveryRank) {
  // Without tie(), the last layer's gradient of wte lands in a parameter stage 1 does not train:
  // a silent wrong answer, refused after the batch on both ranks (before any optimizer step).
  auto world = dist::world();
  manual_seed(0);
  auto wte = std::make_shared<nn::Embedding>(nn::EmbeddingOptions(256, 8).init_std(0.02));
  auto model = std::make_shared<nn::Sequential>();
  model->push_back("embed", wte);
  model->push_back("ln_f", std::make_shared<nn::LayerNorm>(8));
  model->push_back("lm_head", std::make_shared<UnregisteredTie>(wte));
  Pipe pipe(model, world, gpt_loss, PipeOptions().microbatches(kMicrobatches).balance(std::vector<int>{1, 2}));
  EXPECT_TRUE(pipe.tied_parameters().empty());
  const TokenBatch b = token_batch(0, kRows);
  if (pipe.stage() == 1) {
    expect_error_naming([&] { pipe.train_step(b.x, b.y); },
                        {"stage 1", "embed.weight", "PipeOptions().tie("});
  } else {
    expect_error_naming([&] { pipe.train_step(b.x, b.y); }, {"stage 1 found a problem"});
  }
}

TEST(PipeGPT, ADeclarationNamingWhatTheModelLacksIsAnError) {
  auto world = dist::world();
  expect_error_naming(
      [&] { Pipe(tiny_gpt(), world, gpt_loss, PipeOptions().tie("embed.wte.weigth", {"lm_head"})); },
      {"embed.wte.weigth", "no parameter"});
  expect_error_naming(
      [&] { Pipe(tiny_gpt(), world, gpt_loss, PipeOptions().tie("embed.wte.weight", {"head"})); },
      {"no layer \"head\"", "embed, h0, h1, ln_f, lm_head"});
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
