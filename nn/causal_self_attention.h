// CausalSelfAttention: GPT-2's attention sublayer, x [B, T, C] -> [B, T, C]:
//
//   x --c_attn--> qkv [B, T, 3C] --causal_self_attention--> y [B, T, C] --c_proj--> out
//        Linear(C, 3C)     split into n_head heads, softmax(q k^T / sqrt(D)) v     Linear(C, C)
//                          with the causal mask, heads merged back (one op)
//
// The attention in the middle is FlashAttention's blocked algorithm (tensor/ops.h's
// causal_attention): the [B, n_head, T, T] scores are never stored, so memory grows linearly
// in T. The two Linears are registered as "c_attn" and "c_proj", GPT-2's names, with
// nn::Linear's [out, in] weights: the state_dict of nanoGPT's or llm.c's PyTorch GPT-2
// (nn.Linear) loads as it is ("transformer.h.0.attn.c_attn.weight" [3C, C], ...); Hugging
// Face's checkpoints store these as Conv1D, [in, out], and need their weights transposed.
// q | k | v lie in that order along c_attn's outputs, head h at columns [h D, (h + 1) D) of
// each. No dropout (GPT-2's attn_pdrop and resid_pdrop; nanoGPT's default 0).
//
// Tensor parallelism (dist/tensor_parallel/, Megatron-LM): forward finds c_attn and c_proj among
// its children by name at every call, never through a pointer kept at construction, so
// Module::replace_module can swap them for their parallel versions; and it runs as many heads
// as c_attn's output holds, qkv width / (3 D) with D = n_embd / n_head the head's width. With
// c_attn split by heads over T ranks (q_r | k_r | v_r) a rank runs its n_head / T heads, and
// its [B, T, C / T] output is the input of a row-parallel c_proj.
#pragma once

#include <memory>

#include "nn/linear.h"
#include "nn/module.h"

namespace tessera {
namespace nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, bool bias = true);
  std::string type_name() const override { return "CausalSelfAttention"; }
  std::string extra_repr() const override;
  Variable forward(const Variable& x) override;

  // The children as Linears; null once replaced by another kind of module (a parallel one).
  std::shared_ptr<Linear> c_attn() const;
  std::shared_ptr<Linear> c_proj() const;
  int64_t n_embd() const { return n_embd_; }
  int64_t n_head() const { return n_head_; }  // of the whole layer, whatever runs locally
  int64_t head_dim() const { return n_embd_ / n_head_; }

  // Selective activation recomputation of the attention core (Korthikanti et al. 2022): when
  // on, the attention's output is not kept for c_proj's backward, nor are the attention op's
  // q, k, v in the heads' layout, its output and logsumexp; only c_attn's output qkv is, and
  // the core runs again from it in backward (autograd/recompute.h). Off by default.
  void set_recompute_core(bool on) { recompute_core_ = on; }
  bool recompute_core() const { return recompute_core_; }

 private:
  // The child registered as `name` (c_attn, c_proj), as it is now.
  const std::shared_ptr<Module>& child(const char* name) const;

  int64_t n_embd_, n_head_;
  bool recompute_core_ = false;
};

}  // namespace nn
}  // namespace tessera
