// GPT-2 (Radford et al. 2019), as nanoGPT and llm.c write it: token and learned position
// embeddings, n_layer pre-LayerNorm blocks, a final LayerNorm, and the output projection tied to
// the token embedding. Token ids [B, T] (i64) in, logits [B, T, vocab] out:
//
//   idx ──embed──> x = wte[idx] + wpe[0..T)                                  [B, T, C]
//        h0 ... h{L-1}:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))       [B, T, C]
//          attn: c_attn Linear(C, 3C), causal attention over n_head heads, c_proj Linear(C, C)
//          mlp:  c_fc Linear(C, 4C), GELU (tanh form), c_proj Linear(4C, C)
//        ln_f ──lm_head──> logits = ln_f(x) wte^T                             [B, T, V]
//
// The model is an nn::Sequential of those children ("embed", "h0", ..., "ln_f", "lm_head"),
// so a pipeline cuts it between blocks and ZeRO-3's units are blocks. Parameter names follow
// (embed.wte.weight, h0.attn.c_attn.weight, ..., ln_f.bias); lm_head has none of its own: it
// reads embed.wte.weight (weight tying, GPT-2's: the gradient of wte is the sum of the lookup's
// rows and the projection's). Initialization as GPT-2's: every weight N(0, 0.02), the residual
// projections (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm 1 and 0,
// drawn from the default generator in parameter order, so a seed fixes the model.
// No dropout (nanoGPT's default 0).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/sequential.h"

namespace tessera {
namespace models {

// Activation recomputation in the blocks (Korthikanti et al. 2022; Megatron-LM's
// --recompute-granularity and --recompute-modules): what a block keeps from its forward for
// its backward.
//   none       everything its ops keep (cost/activation_memory.h counts it)
//   selective  all but the outputs of the chosen cheap ops, recomputed in backward from what
//              is kept (autograd/recompute.h): core_attn (the attention core, from c_attn's
//              output; the paper's choice), layernorm (ln_1's and ln_2's outputs, from the
//              block's input and the residual), gelu (from c_fc's output). GEMM outputs are
//              kept, so no GEMM runs twice.
//   full       only the block's input: the whole block runs again in backward (checkpoint()).
struct Recompute {
  enum class Granularity { kNone, kSelective, kFull };
  Granularity granularity = Granularity::kNone;
  bool core_attn = true, layernorm = false, gelu = false;  // selective's ops

  // "none" | "selective" | "full", and selective's ops as "core_attn,layernorm,gelu" (any
  // non-empty subset); throws naming a value that is neither.
  static Recompute parse(const std::string& granularity, const std::string& modules = "core_attn");
  // "none", "full", or "selective(core_attn,gelu)".
  std::string str() const;
};

struct GPTConfig {
  int64_t vocab_size = 50257;
  int64_t context = 1024;  // the longest sequence (wpe's rows): GPT-2's block_size
  int64_t n_layer = 12, n_head = 12, n_embd = 768;
  Recompute recompute;  // not the architecture: what the blocks keep for backward

  // GPT-2 124M (12 layers, 12 heads, 768 wide, context 1024), its vocabulary 50257 padded to a
  // multiple of 64 (50304), as llm.c and nanoGPT pad it: the extra rows are never a target.
  static GPTConfig gpt2(int64_t vocab_size = 50257);
  // The smallest that is still a transformer: 4 layers, 4 heads, 128 wide, context 256.
  static GPTConfig nano(int64_t vocab_size = 50257);
  // For tests that train under every strategy in seconds: 2 layers, 2 heads, 32 wide, context 64
  // (with the byte tokenizer's 256 tokens, about 34,000 parameters).
  static GPTConfig tiny(int64_t vocab_size = 256);
  // By name: "gpt-tiny", "gpt-nano" or "gpt2" (throws naming the names).
  static GPTConfig named(const std::string& name, int64_t vocab_size);

  // Parameters, counted once (wte serves as lm_head).
  int64_t parameters() const;
};

// vocab rounded up to a multiple of `multiple`.
int64_t padded_vocab(int64_t vocab, int64_t multiple = 64);

// The model; checks the config (heads divide the width, all sizes >= 1).
std::shared_ptr<nn::Sequential> GPT(const GPTConfig& config);

// Sets what every block of a GPT built by GPT() recomputes (the config's choice at build).
void set_recompute(nn::Module& gpt, const Recompute& r);

// The mean cross-entropy of logits [B, T, V] against targets [B, T] (i64).
Variable lm_loss(const Variable& logits, const Tensor& targets);

// The parameters AdamW decays (the Linear weights) and those it does not (biases, LayerNorm,
// the embeddings), as GPT-2's recipes group them: {decay, no_decay}.
std::pair<std::vector<Variable>, std::vector<Variable>> weight_decay_groups(nn::Module& model);
// The same split of `params` (some of the model's parameters: a pipeline stage's, say), each
// group in `params`' order; an error for a parameter the model does not hold.
std::pair<std::vector<Variable>, std::vector<Variable>> weight_decay_groups(
    nn::Module& model, const std::vector<Variable>& params);

}  // namespace models
}  // namespace tessera
