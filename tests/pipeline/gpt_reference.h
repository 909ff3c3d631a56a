// What the GPT pipeline tests compare against: gpt-tiny (models::GPTConfig::tiny: embed, h0, h1,
// ln_f, lm_head, whose output projection reads embed.wte.weight) built from one seed on every
// rank, token batches every rank builds alike, and one process training the same model by
// gradient accumulation over the same micro-batches.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "models/gpt.h"
#include "optim/adam.h"
#include "pipeline/microbatch.h"
#include "pipeline/pipe.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace pipeline {

constexpr uint64_t kGPTSeed = 11;
constexpr int64_t kTokens = 8;  // T, the window

inline std::shared_ptr<nn::Sequential> tiny_gpt() {
  manual_seed(kGPTSeed);
  return models::GPT(models::GPTConfig::tiny());
}

// The use of the token embedding's weight that the GPT's module tree does not show.
inline PipeOptions gpt_options(const std::string& schedule, int M) {
  return PipeOptions()
      .microbatches(M)
      .schedule(schedule)
      .chunks_per_rank(schedule == "interleaved" ? 2 : 1)
      .tie("embed.wte.weight", {"lm_head"});
}

struct TokenBatch {
  Tensor x, y;  // token ids [rows, kTokens] and the next tokens
};

// The same batch on every rank.
inline TokenBatch token_batch(int step, int64_t rows) {
  std::mt19937 gen(300 + step);
  const int64_t vocab = models::GPTConfig::tiny().vocab_size;
  std::vector<int64_t> ids(rows * (kTokens + 1));
  for (int64_t& id : ids) id = static_cast<int64_t>(gen() % vocab);
  const Tensor all = from_vector<int64_t>(ids, {rows, kTokens + 1});
  return {all.narrow(1, 0, kTokens).contiguous(), all.narrow(1, 1, kTokens).contiguous()};
}

inline Variable gpt_loss(const Variable& logits, const Tensor& targets) {
  return models::lm_loss(logits, targets);
}

// AdamW with its weight decay on every parameter (one group), as a stage's optimizer and the
// reference's are made.
constexpr double kLr = 1e-2;
inline optim::AdamOptions adamw_options() { return optim::AdamWOptions(kLr).weight_decay(0.1); }

// One process: the batch's loss and gradients accumulated over its M micro-batches (each
// micro-batch's loss weighted by its share, as the pipeline weights it), `replicas` equal
// parts of the batch averaged as data-parallel replicas would. No optimizer step.
inline double reference_backward(nn::Sequential& model, const TokenBatch& b, int M, int replicas = 1) {
  double total = 0;
  const int64_t rows = b.x.size(0) / replicas;
  for (int d = 0; d < replicas; ++d) {
    for (const Microbatch& mb :
         split_microbatches(b.x.narrow(0, d * rows, rows), b.y.narrow(0, d * rows, rows), M)) {
      const Variable loss = gpt_loss(model.forward(Variable(mb.input)), mb.target) * (mb.weight / replicas);
      total += loss.item();
      loss.backward();
    }
  }
  return total;
}

// The keys' bias (the middle third of c_attn.bias) adds q . b_k to every score of a row, which
// softmax cancels: its gradient is rounding only, and Adam moves it by up to lr a step whichever
// way the rounding points (tests/dist/tensor_parallel/gpt_test.cc says the same). After `steps`
// steps it is within 2 lr a step of one process's; everything else within the test's tolerance.
inline void expect_close(const std::string& name, const Tensor& got, const Tensor& want, double tol,
                         double lr_steps) {
  if (lr_steps > 0 && name.find("attn.c_attn.bias") != std::string::npos) {
    const int64_t c = want.numel() / 3;
    EXPECT_LT(max_abs_diff(got.narrow(0, 0, c), want.narrow(0, 0, c)), tol) << name << " (queries)";
    EXPECT_LE(max_abs_diff(got.narrow(0, c, c), want.narrow(0, c, c)), 2 * lr_steps) << name << " (keys)";
    EXPECT_LT(max_abs_diff(got.narrow(0, 2 * c, c), want.narrow(0, 2 * c, c)), tol) << name << " (values)";
    return;
  }
  EXPECT_LT(max_abs_diff(got, want), tol) << name;
}

// This rank's parameters (or, with `grads`, their gradients) against the reference's of the
// same name (a tied copy against the original); `lr_steps`: the learning rate times the steps
// taken (the keys' bias, above). Returns how many were compared: summed over the pipeline, the
// reference's count plus one per copy.
inline int expect_parameters_match(const Pipe& pipe, nn::Sequential& reference, double tol,
                                   double lr_steps, bool grads = false) {
  std::map<const VariableImpl*, std::string> name_of;
  for (const auto& [name, p] : pipe.model()->named_parameters()) name_of[p.impl()] = name;
  std::map<std::string, Variable> ref;
  for (const auto& [name, p] : reference.named_parameters()) ref[name] = p;
  int compared = 0;
  for (const Variable& p : pipe.parameters()) {
    const std::string& name = name_of[p.impl()];
    const Variable& r = ref.at(name);
    const Tensor got = grads ? p.grad() : p.data();
    const Tensor want = grads ? r.grad() : r.data();
    EXPECT_TRUE(got.defined()) << "stage " << pipe.stage() << " " << name;
    if (!got.defined()) continue;
    expect_close("stage " + std::to_string(pipe.stage()) + " " + name, got, want, tol, lr_steps);
    ++compared;
  }
  return compared;
}

}  // namespace pipeline
}  // namespace tessera
