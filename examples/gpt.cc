// A small GPT-2 trained on English text (the fortunes corpus, GPT-2's BPE tokens) with data
// parallelism, from a user's own program: the model from models/gpt.h, AdamW with GPT-2's
// weight-decay groups, gradient clipping, DDP averaging the gradients during backward; the
// validation loss before and after, which must fall. Its PyTorch twin: examples/pytorch/gpt.py.
//
//   bazel build -c opt //examples:gpt
//   mpirun -np 2 --oversubscribe --allow-run-as-root bazel-bin/examples/gpt --steps=50
#include <cmath>
#include <cstdio>

#include "examples/net.h"

using namespace tessera;

// The mean loss over the first `windows` validation windows (every rank the same ones).
double validation_loss(nn::Module& model, const data::Dataset& val, int64_t windows) {
  NoGradGuard no_grad;
  double sum = 0;
  for (int64_t i = 0; i < windows; ++i) {
    const data::Batch b = val.get_batch({i});
    sum += models::lm_loss(model(Variable(b.inputs)), b.targets).item();
  }
  return sum / windows;
}

int train(int64_t steps, const std::shared_ptr<dist::ProcessGroup>& world) {
  // The text, tokenized once and stored (data/text_data.h); windows of 32 tokens and their
  // next-token targets.
  const data::TextTokens text = data::load_text_tokens(data::TextDataOptions().tokenizer("gpt2"));
  const int64_t seq_len = 32;
  auto train_set = std::make_shared<data::TokenWindows>(text.train, seq_len);
  const data::TokenWindows val_set(text.val, seq_len);

  models::GPTConfig config;  // smaller than gpt-nano, so that a few steps show learning
  config.vocab_size = models::padded_vocab(text.vocab_size);
  config.context = 64;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 64;
  manual_seed(0);  // the same model on every rank (DDP broadcasts rank 0's anyway)
  auto model = models::GPT(config);
  dist::DistributedDataParallel ddp(model, world);

  // AdamW decays the Linear weights only (not biases, LayerNorm or the embeddings).
  auto [decay, no_decay] = models::weight_decay_groups(*model);
  const auto adamw = optim::AdamOptions(1e-3).betas({0.9, 0.95});
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<optim::AdamOptions>(optim::AdamOptions(adamw).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<optim::AdamOptions>(optim::AdamOptions(adamw).weight_decay(0)));
  optim::AdamW opt(std::move(groups), adamw);

  const double before = validation_loss(*model, val_set, 8);
  data::DataLoader loader(train_set, data::DataLoaderOptions(8),
                          std::make_shared<data::DistributedSampler>(
                              train_set->size(),
                              data::DistributedSamplerOptions(world->size(), world->rank()).seed(0)));
  int64_t step = 0;
  for (data::Batch& b : loader.epoch(0)) {
    opt.zero_grad();
    Variable loss = models::lm_loss(ddp(b.inputs), b.targets);
    loss.backward();  // gradients averaged across ranks when this returns
    optim::clip_grad_norm(model->parameters(), 1.0);
    opt.step();
    if (++step % 10 == 0) {
      const double mean = dist::all_reduce_scalar(loss.item(), *world, dist::ReduceOp::kMean);
      if (world->rank() == 0) std::printf("step %lld loss %.4f\n", (long long)step, mean);
    }
    if (step == steps) break;
  }
  const double after = validation_loss(*model, val_set, 8);
  if (world->rank() == 0) {
    std::printf("%d ranks, %lld steps: validation loss %.4f -> %.4f (perplexity %.1f -> %.1f)\n",
                world->size(), (long long)step, before, after, std::exp(before), std::exp(after));
  }
  return steps > 0 && !(after < before) ? 1 : 0;  // a few steps must lower it
}

int main(int argc, char** argv) {
  const int64_t steps = example::steps_flag(argc, argv);
  auto world = dist::init(&argc, &argv);
  return dist::run_or_abort([&] { return train(steps, world); });
}
