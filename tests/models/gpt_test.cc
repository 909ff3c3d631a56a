// models/gpt.h against PyTorch, to the last digit: the fixture tests/models/data/
// gpt_reference.safetensors is tests/models/gpt_reference.py's output (a GPT-2 written out in
// PyTorch, nanoGPT's way, at a small odd configuration): its weights loaded into tessera's GPT
// must give its logits, its loss, every parameter's gradient and the losses and parameters of 10
// AdamW steps (weight decay on the Linear weights only), in float32, within 1e-5 of each
// tensor's largest value. Also the GPT's own contracts: GPT-2 124M's parameter count as llm.c
// prints it, weight tying (one wte, both uses in its gradient), a seed fixing the model, GPT-2's
// initialization, errors naming the sizes.
#include "models/gpt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tensor/safetensors.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace models {
namespace {

// The fixture's configuration (gpt_reference.py's constants).
GPTConfig fixture_config() {
  GPTConfig c;
  c.vocab_size = 67;
  c.context = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

const StateDict& fixture() {
  static const StateDict f =
      load_safetensors(std::string(std::getenv("TEST_SRCDIR")) +
                       "/tessera/tests/models/data/gpt_reference.safetensors")
          .tensors;
  return f;
}

// max |got - want| / max |want|: the error relative to the tensor's scale.
double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(kF64).contiguous(), w = want.to(kF64).contiguous();
  EXPECT_EQ(g.shape(), w.shape());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    diff = std::max(diff, std::abs(g.data<double>()[i] - w.data<double>()[i]));
    scale = std::max(scale, std::abs(w.data<double>()[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// The GPT with the fixture's weights.
std::shared_ptr<nn::Sequential> fixture_model() {
  auto model = GPT(fixture_config());
  StateDict weights;
  for (const auto& [name, p] : model->named_parameters()) weights.set(name, fixture().at(name));
  model->load_state_dict(weights);
  return model;
}

TEST(GPT, LogitsLossAndGradientsEqualPyTorch) {
  auto model = fixture_model();
  const Variable logits = (*model)(Variable(fixture().at("idx")));
  EXPECT_LT(relative_error(logits.data(), fixture().at("logits")), 1e-5);
  const Variable loss = lm_loss(logits, fixture().at("targets"));
  EXPECT_LT(relative_error(loss.data(), fixture().at("loss")), 1e-6);
  loss.backward();
  int compared = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_LT(relative_error(p.grad(), fixture().at("grad." + name)), 1e-5) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 2 + 2 * 12 + 2);  // wte, wpe; 12 a block; ln_f
}

TEST(GPT, TenAdamWStepsEqualPyTorch) {
  auto model = fixture_model();
  auto [decay, no_decay] = weight_decay_groups(*model);
  EXPECT_EQ(decay.size(), 2u * 4);  // c_attn, attn.c_proj, c_fc, mlp.c_proj per block
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<optim::AdamOptions>(
                                 optim::AdamOptions(1e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<optim::AdamOptions>(
                                    optim::AdamOptions(1e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0)));
  optim::AdamW opt(std::move(groups), optim::AdamOptions(1e-3));
  const Tensor& idx = fixture().at("idx");
  const Tensor& losses = fixture().at("losses");
  for (int64_t step = 0; step < losses.numel(); ++step) {
    opt.zero_grad();
    const Variable loss = lm_loss((*model)(Variable(idx)), fixture().at("targets"));
    loss.backward();
    opt.step();
    const double want = losses.to(kF64).data<double>()[step];
    EXPECT_NEAR(loss.item(), want, 1e-5 * std::abs(want)) << "step " << step;
  }
  for (const auto& [name, p] : model->named_parameters()) {
    Tensor got = p.data(), want = fixture().at("after." + name);
    if (name.find("attn.c_attn.bias") != std::string::npos) {
      // The keys' bias (the middle third) adds q . b_k to every score of a row, which softmax
      // cancels: its gradient is zero but for rounding, and Adam, dividing each gradient by its
      // own running size, moves it by about lr a step whichever way the rounding points (PyTorch
      // run twice differs there by 2e-4). The queries' and values' thirds are compared.
      const int64_t c = got.numel() / 3;
      EXPECT_LT(relative_error(got.narrow(0, 0, c), want.narrow(0, 0, c)), 1e-5) << name;
      EXPECT_LT(relative_error(got.narrow(0, 2 * c, c), want.narrow(0, 2 * c, c)), 1e-5) << name;
      // Each within 2 lr a step of PyTorch's.
      EXPECT_LE(max_abs_diff(got.narrow(0, c, c), want.narrow(0, c, c)), 2 * 1e-3 * losses.numel())
          << name;
      continue;
    }
    EXPECT_LT(relative_error(got, want), 1e-5) << name;
  }
}

// llm.c's count for GPT-2 124M with the vocabulary padded to 50304: 124,475,904.
TEST(GPT, Gpt2HasLlmCsParameterCount) {
  const GPTConfig c = GPTConfig::gpt2();
  EXPECT_EQ(c.vocab_size, 50304);
  EXPECT_EQ(c.parameters(), 124475904);
  const GPTConfig nano = GPTConfig::nano(256);
  EXPECT_EQ(nano.vocab_size, 256);
  int64_t counted = 0;
  for (const auto& [name, p] : GPT(nano)->named_parameters()) counted += p.numel();
  EXPECT_EQ(counted, nano.parameters());
  EXPECT_EQ(padded_vocab(50257), 50304);
  EXPECT_EQ(padded_vocab(64), 64);
}

TEST(GPT, TheOutputProjectionIsTheTokenEmbedding) {
  auto model = GPT(fixture_config());
  for (const auto& [name, p] : model->named_parameters()) {
    EXPECT_EQ(name.rfind("lm_head", 0), std::string::npos) << name;
  }
  // The tie is in the module tree (ZeRO-3 keeps wte in the unit enclosing both of its users).
  const auto ties = model->named_tied_parameters();
  ASSERT_EQ(ties.size(), 1u);
  EXPECT_EQ(ties[0].first, "lm_head.weight");
  EXPECT_TRUE(ties[0].second.is_same(model->named_parameters().front().second));
  // Zero the lookup's use (every token id 0, position rows aside): wte's gradient still has
  // rows everywhere from the projection, and row 0 the lookup's on top.
  const Tensor idx = zeros({1, 3}, TensorOptions(kI64));
  const Tensor targets = full({1, 3}, 5.0, TensorOptions(kI64));
  const Variable loss = lm_loss((*model)(Variable(idx)), targets);
  loss.backward();
  const Tensor g = model->named_parameters().front().second.grad();
  ASSERT_EQ(g.shape(), (Shape{67, 16}));
  const Tensor row = g.narrow(0, 5, 1).contiguous().to(kF64);
  double norm = 0;
  for (int64_t i = 0; i < row.numel(); ++i) norm += row.data<double>()[i] * row.data<double>()[i];
  EXPECT_GT(norm, 0) << "the target's row gets the projection's gradient";
}

TEST(GPT, ASeedFixesTheModelAndItsInitializationIsGpt2s) {
  manual_seed(7);
  auto a = GPT(GPTConfig::nano(256));
  manual_seed(7);
  auto b = GPT(GPTConfig::nano(256));
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(max_abs_diff(pa[i].second.data(), pb[i].second.data()), 0.0) << pa[i].first;
  }
  // Standard deviations: 0.02, and 0.02 / sqrt(2 * 4) for the residual projections.
  for (const auto& [name, p] : pa) {
    const Tensor t = p.data().to(kF64).contiguous();
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.data<double>()[i], sq += t.data<double>()[i] * t.data<double>()[i];
    const double mean = sum / t.numel(), std = std::sqrt(sq / t.numel() - mean * mean);
    if (name.find("bias") != std::string::npos) {
      EXPECT_EQ(sq, 0) << name;
    } else if (name.find("ln_") != std::string::npos) {
      EXPECT_EQ(mean, 1) << name;
    } else {
      const double want = name.find("c_proj.weight") != std::string::npos ? 0.02 / std::sqrt(8.0) : 0.02;
      EXPECT_NEAR(std, want, 0.1 * want) << name;
    }
  }
}

TEST(GPT, BadSizesAreNamed) {
  GPTConfig c = fixture_config();
  c.n_head = 3;
  testing::expect_error([&] { GPT(c); }, "GPT: n_embd 16 is not a multiple of n_head 3");
  auto model = GPT(fixture_config());
  testing::expect_error([&] { (*model)(Variable(zeros({1, 17}, TensorOptions(kI64)))); },
                        "GPT: a sequence of 17 tokens; the context is 16");
  testing::expect_error([] { GPTConfig::named("gpt3", 256); }, "no configuration 'gpt3'");
}

}  // namespace
}  // namespace models
}  // namespace tessera
