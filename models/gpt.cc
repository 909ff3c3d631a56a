#include "models/gpt.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "nn/nn.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace models {

namespace {

// wte[idx] + wpe[0..T): token ids [B, T] -> [B, T, C]. wte and wpe run through
// named_children(), so replace_module's swaps take effect (tensor parallelism's
// vocabulary-parallel embedding), and no member keeps a swapped-out table alive.
class GPTEmbedding : public nn::Module {
 public:
  GPTEmbedding(std::shared_ptr<nn::Embedding> wte, int64_t context, int64_t n_embd)
      : context_(context) {
    register_module("wte", std::move(wte));
    register_module<nn::Embedding>("wpe", nn::EmbeddingOptions(context, n_embd).init_std(0.02));
  }
  std::string type_name() const override { return "GPTEmbedding"; }
  Variable forward(const Variable& idx) override {
    TS_CHECK(idx.dim() == 2, "GPT: expected token ids [B, T], got shape ", idx.shape());
    const int64_t t = idx.shape()[1];
    TS_CHECK(t >= 1 && t <= context_, "GPT: a sequence of ", t, " tokens; the context is ",
             context_, " (positions 0..", context_ - 1, ")");
    const Tensor positions = arange(t, TensorOptions(kI64).device(idx.data().device()));
    nn::Module& wte = *named_children()[0].second;
    nn::Module& wpe = *named_children()[1].second;
    return add(wte(idx), wpe(Variable(positions)));
  }

 private:
  int64_t context_;
};

// c_fc, gelu, c_proj run in turn through named_children(), as Sequential runs its layers, so
// replace_module's swaps (tensor parallelism's column- and row-parallel Linears) take effect.
class GPTMLP : public nn::Module {
 public:
  explicit GPTMLP(int64_t n_embd) {
    register_module<nn::Linear>("c_fc", n_embd, 4 * n_embd);
    register_module<nn::GELU>("gelu", GeluApproximate::kTanh);
    register_module<nn::Linear>("c_proj", 4 * n_embd, n_embd);
  }
  std::string type_name() const override { return "GPTMLP"; }
  Variable forward(const Variable& x) override {
    Variable h = x;
    for (const auto& [name, layer] : named_children()) h = (*layer)(h);
    return h;
  }
};

// A pre-LayerNorm block: x + attn(ln_1(x)), then + mlp(ln_2(.)).
class GPTBlock : public nn::Module {
 public:
  GPTBlock(int64_t n_embd, int64_t n_head) {
    ln_1_ = register_module<nn::LayerNorm>("ln_1", n_embd);
    attn_ = register_module<nn::CausalSelfAttention>("attn", n_embd, n_head);
    ln_2_ = register_module<nn::LayerNorm>("ln_2", n_embd);
    mlp_ = register_module<GPTMLP>("mlp", n_embd);
  }
  std::string type_name() const override { return "GPTBlock"; }
  Variable forward(const Variable& x) override {
    const Variable h = add(x, (*attn_)((*ln_1_)(x)));
    return add(h, (*mlp_)((*ln_2_)(h)));
  }

 private:
  std::shared_ptr<nn::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<nn::CausalSelfAttention> attn_;
  std::shared_ptr<GPTMLP> mlp_;
};

// logits = x wte^T: the output projection, tied to the token embedding (no parameter of its
// own; the weight is the embedding's, whose gradient collects both uses). The tie is registered
// (nn::Module::register_tied_parameter), so the module tree shows that embed and lm_head share
// it: ZeRO-3 then keeps it in the unit enclosing both.
class TiedLMHead : public nn::Module {
 public:
  explicit TiedLMHead(const std::shared_ptr<nn::Embedding>& wte)
      : weight_(register_tied_parameter("weight", wte->weight())) {}
  std::string type_name() const override { return "TiedLMHead"; }
  Variable forward(const Variable& x) override { return linear(x, weight_, Variable()); }

 private:
  Variable weight_;
};

}  // namespace

GPTConfig GPTConfig::gpt2(int64_t vocab_size) {
  GPTConfig c;
  c.vocab_size = padded_vocab(vocab_size);
  return c;
}

namespace {

// A config of these sizes, its vocabulary padded.
GPTConfig sized(int64_t vocab_size, int64_t context, int64_t n_layer, int64_t n_head,
                int64_t n_embd) {
  GPTConfig c;
  c.vocab_size = padded_vocab(vocab_size);
  c.context = context;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  return c;
}

}  // namespace

GPTConfig GPTConfig::nano(int64_t vocab_size) { return sized(vocab_size, 256, 4, 4, 128); }

GPTConfig GPTConfig::tiny(int64_t vocab_size) { return sized(vocab_size, 64, 2, 2, 32); }

GPTConfig GPTConfig::named(const std::string& name, int64_t vocab_size) {
  if (name == "gpt2") return gpt2(vocab_size);
  if (name == "gpt-nano") return nano(vocab_size);
  if (name == "gpt-tiny") return tiny(vocab_size);
  TS_FAIL("GPT: no configuration '", name, "' (gpt-tiny, gpt-nano, gpt2)");
}

int64_t GPTConfig::parameters() const {
  const int64_t c = n_embd;
  const int64_t block = 2 * 2 * c               // ln_1, ln_2
                        + 3 * c * c + 3 * c     // c_attn
                        + c * c + c             // attn.c_proj
                        + 4 * c * c + 4 * c     // c_fc
                        + 4 * c * c + c;        // mlp.c_proj
  return vocab_size * c + context * c + n_layer * block + 2 * c;
}

int64_t padded_vocab(int64_t vocab, int64_t multiple) {
  TS_CHECK(vocab >= 1 && multiple >= 1, "padded_vocab: vocab ", vocab, ", multiple ", multiple);
  return (vocab + multiple - 1) / multiple * multiple;
}

std::shared_ptr<nn::Sequential> GPT(const GPTConfig& c) {
  TS_CHECK(c.vocab_size >= 1 && c.context >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1,
           "GPT: every size must be >= 1: vocab_size ", c.vocab_size, ", context ", c.context,
           ", n_layer ", c.n_layer, ", n_head ", c.n_head, ", n_embd ", c.n_embd);
  TS_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd ", c.n_embd, " is not a multiple of n_head ",
           c.n_head);
  auto model = std::make_shared<nn::Sequential>();
  // wte first, then wpe: the generator's draws in parameter order.
  auto wte = std::make_shared<nn::Embedding>(
      nn::EmbeddingOptions(c.vocab_size, c.n_embd).init_std(0.02));
  model->push_back("embed", std::make_shared<GPTEmbedding>(wte, c.context, c.n_embd));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    model->push_back("h" + std::to_string(l), std::make_shared<GPTBlock>(c.n_embd, c.n_head));
  }
  model->push_back("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd));
  model->push_back("lm_head", std::make_shared<TiedLMHead>(wte));

  // GPT-2's initialization, in parameter order from the default generator.
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (auto& [name, p] : model->named_parameters()) {
    const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    const bool layer_norm = name.find(".ln_") != std::string::npos || name.rfind("ln_f.", 0) == 0;
    Tensor data = p.data();
    if (bias) {
      data.fill_(0.0);
    } else if (layer_norm) {
      data.fill_(1.0);
    } else {
      const bool residual = name.find("c_proj.weight") != std::string::npos;
      nn::init::normal_(data, 0.0, residual ? residual_std : 0.02);
    }
  }
  return model;
}

Variable lm_loss(const Variable& logits, const Tensor& targets) {
  TS_CHECK(logits.dim() == 3 && targets.dim() == 2 && logits.shape()[0] == targets.shape()[0] &&
               logits.shape()[1] == targets.shape()[1],
           "lm_loss: logits [B, T, V] and targets [B, T], got ", logits.shape(), " and ",
           targets.shape());
  const int64_t v = logits.shape()[2];
  return cross_entropy(reshape(logits, {-1, v}), targets.reshape({-1}));
}

std::pair<std::vector<Variable>, std::vector<Variable>> weight_decay_groups(nn::Module& model) {
  std::vector<Variable> decay, no_decay;
  for (auto& [name, p] : model.named_parameters()) {
    const bool embedding = name.find(".wte.") != std::string::npos ||
                           name.find(".wpe.") != std::string::npos ||
                           name.rfind("wte.", 0) == 0 || name.rfind("wpe.", 0) == 0;
    const bool matrix = p.dim() == 2 && !embedding;
    (matrix ? decay : no_decay).push_back(p);
  }
  return {decay, no_decay};
}

std::pair<std::vector<Variable>, std::vector<Variable>> weight_decay_groups(
    nn::Module& model, const std::vector<Variable>& params) {
  const auto [decay, no_decay] = weight_decay_groups(model);
  auto in = [](const std::vector<Variable>& list, const Variable& p) {
    return std::any_of(list.begin(), list.end(), [&](const Variable& q) { return q.is_same(p); });
  };
  std::vector<Variable> decayed, spared;
  for (size_t i = 0; i < params.size(); ++i) {
    const Variable& p = params[i];
    TS_CHECK(in(decay, p) || in(no_decay, p), "weight_decay_groups: parameter ", i, " (shape ",
             p.shape(), ") is not one of the model's (a flat shard?): it has no weight-decay group");
    (in(decay, p) ? decayed : spared).push_back(p);
  }
  return {decayed, spared};
}

}  // namespace models
}  // namespace tessera
