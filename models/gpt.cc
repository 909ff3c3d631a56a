#include "models/gpt.h"

#include <algorithm>
#include <cmath>

#include "autograd/checkpoint.h"
#include "autograd/functions.h"
#include "autograd/recompute.h"
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

// The child registered as `name`, as it is now: found at every call, never kept from
// construction, so replace_module's swaps (tensor parallelism's column- and row-parallel
// Linears, context parallelism's attention) take effect and no member keeps a swapped-out
// module alive.
nn::Module& child(const nn::Module& parent, const char* name) {
  for (const auto& [child_name, module] : parent.named_children()) {
    if (child_name == name) return *module;
  }
  TS_FAIL(parent.type_name(), ": no child named '", name, "'");
}

// c_fc, GELU, c_proj. Under selective recomputation of the GELU, its output (c_proj's input,
// 4 C wide) is not kept but recomputed from c_fc's output in backward.
class GPTMLP : public nn::Module {
 public:
  explicit GPTMLP(int64_t n_embd) {
    register_module<nn::Linear>("c_fc", n_embd, 4 * n_embd);
    register_module<nn::GELU>("gelu", GeluApproximate::kTanh);
    register_module<nn::Linear>("c_proj", 4 * n_embd, n_embd);
  }
  std::string type_name() const override { return "GPTMLP"; }
  void set_recompute_gelu(bool on) { recompute_gelu_ = on; }
  Variable forward(const Variable& x) override {
    const Variable h = child(*this, "c_fc")(x);
    const UnaryFn gelu = [this](const Variable& v) { return child(*this, "gelu")(v); };
    const UnaryFn c_proj = [this](const Variable& v) { return child(*this, "c_proj")(v); };
    return recompute_gelu_ ? recompute_output(gelu, h, c_proj) : c_proj(gelu(h));
  }

 private:
  bool recompute_gelu_ = false;
};

// A pre-LayerNorm block: x + attn(ln_1(x)), then + mlp(ln_2(.)). Under full recomputation the
// whole block runs under checkpoint() (only its input kept); under selective recomputation of
// the LayerNorms their outputs (the inputs of c_attn and c_fc) are recomputed in backward.
class GPTBlock : public nn::Module {
 public:
  GPTBlock(int64_t n_embd, int64_t n_head) {
    register_module<nn::LayerNorm>("ln_1", n_embd);
    register_module<nn::CausalSelfAttention>("attn", n_embd, n_head);
    register_module<nn::LayerNorm>("ln_2", n_embd);
    register_module<GPTMLP>("mlp", n_embd);
  }
  std::string type_name() const override { return "GPTBlock"; }

  void set_recompute(const Recompute& r) {
    recompute_ = r;
    const bool selective = r.granularity == Recompute::Granularity::kSelective;
    auto* attn = dynamic_cast<nn::CausalSelfAttention*>(&child(*this, "attn"));
    TS_CHECK(attn != nullptr || !(selective && r.core_attn), "GPT: --recompute=selective of "
             "core_attn needs the block's attention to be a CausalSelfAttention; it is a ",
             child(*this, "attn").type_name());
    if (attn != nullptr) attn->set_recompute_core(selective && r.core_attn);
    auto* mlp = dynamic_cast<GPTMLP*>(&child(*this, "mlp"));
    TS_CHECK(mlp != nullptr, "GPT: the block's mlp is a ", child(*this, "mlp").type_name());
    mlp->set_recompute_gelu(selective && r.gelu);
  }

  Variable forward(const Variable& x) override {
    if (recompute_.granularity == Recompute::Granularity::kFull) {
      return checkpoint([this](const Variable& v) { return body(v); }, x);
    }
    return body(x);
  }

 private:
  Variable body(const Variable& x) {
    const Variable h = add(x, sublayer("ln_1", "attn", x));
    return add(h, sublayer("ln_2", "mlp", h));
  }

  // f(ln(x)), ln's output recomputed in backward when selective recomputation covers it.
  Variable sublayer(const char* ln, const char* f, const Variable& x) {
    const UnaryFn norm = [this, ln](const Variable& v) { return child(*this, ln)(v); };
    const UnaryFn body = [this, f](const Variable& v) { return child(*this, f)(v); };
    const bool recompute = recompute_.granularity == Recompute::Granularity::kSelective &&
                           recompute_.layernorm;
    return recompute ? recompute_output(norm, x, body) : body(norm(x));
  }

  Recompute recompute_;
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
  set_recompute(*model, c.recompute);

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

Recompute Recompute::parse(const std::string& granularity, const std::string& modules) {
  Recompute r;
  if (granularity == "none") {
    r.granularity = Granularity::kNone;
  } else if (granularity == "selective") {
    r.granularity = Granularity::kSelective;
  } else if (granularity == "full") {
    r.granularity = Granularity::kFull;
  } else {
    TS_FAIL("recompute: '", granularity, "' is not none, selective or full");
  }
  r.core_attn = r.layernorm = r.gelu = false;
  size_t start = 0;
  while (start <= modules.size()) {
    const size_t comma = std::min(modules.find(',', start), modules.size());
    const std::string m = modules.substr(start, comma - start);
    if (m == "core_attn") {
      r.core_attn = true;
    } else if (m == "layernorm") {
      r.layernorm = true;
    } else if (m == "gelu") {
      r.gelu = true;
    } else {
      TS_FAIL("recompute: module '", m, "' in '", modules,
              "' is not core_attn, layernorm or gelu");
    }
    start = comma + 1;
  }
  return r;
}

std::string Recompute::str() const {
  switch (granularity) {
    case Granularity::kNone: return "none";
    case Granularity::kFull: return "full";
    case Granularity::kSelective: break;
  }
  std::string modules;
  for (const auto& [on, name] : {std::pair<bool, const char*>{core_attn, "core_attn"},
                                 {layernorm, "layernorm"}, {gelu, "gelu"}}) {
    if (on) modules += (modules.empty() ? "" : ",") + std::string(name);
  }
  return "selective(" + modules + ")";
}

void set_recompute(nn::Module& gpt, const Recompute& r) {
  int blocks = 0;
  for (const auto& [name, module] : gpt.named_children()) {
    if (auto* block = dynamic_cast<GPTBlock*>(module.get())) {
      block->set_recompute(r);
      ++blocks;
    }
  }
  TS_CHECK(blocks > 0 || r.granularity == Recompute::Granularity::kNone,
           "set_recompute: the model has no GPT block (a ", gpt.type_name(), ")");
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
