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

  const std::shared_ptr<Linear>& c_attn() const { return c_attn_; }
  const std::shared_ptr<Linear>& c_proj() const { return c_proj_; }
  int64_t n_head() const { return n_head_; }

 private:
  int64_t n_embd_, n_head_;
  std::shared_ptr<Linear> c_attn_, c_proj_;
};

}  // namespace nn
}  // namespace tessera
