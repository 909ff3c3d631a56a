#include "nn/causal_self_attention.h"

#include "autograd/functions.h"
#include "autograd/recompute.h"

namespace tessera {
namespace nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, bool bias)
    : n_embd_(n_embd), n_head_(n_head) {
  TS_CHECK(n_embd > 0 && n_head > 0 && n_embd % n_head == 0,
           "CausalSelfAttention: n_embd must be a positive multiple of n_head, got n_embd = ",
           n_embd, ", n_head = ", n_head);
  register_module<Linear>("c_attn", n_embd, 3 * n_embd, bias);
  register_module<Linear>("c_proj", n_embd, n_embd, bias);
}

const std::shared_ptr<Module>& CausalSelfAttention::child(const char* name) const {
  for (const auto& [child_name, module] : named_children()) {
    if (child_name == name) return module;
  }
  TS_FAIL("CausalSelfAttention: no child named '", name, "'");
}

std::shared_ptr<Linear> CausalSelfAttention::c_attn() const {
  return std::dynamic_pointer_cast<Linear>(child("c_attn"));
}

std::shared_ptr<Linear> CausalSelfAttention::c_proj() const {
  return std::dynamic_pointer_cast<Linear>(child("c_proj"));
}

std::string CausalSelfAttention::extra_repr() const {
  return detail::str("n_embd=", n_embd_, ", n_head=", n_head_);
}

Variable CausalSelfAttention::forward(const Variable& x) {
  TS_CHECK(x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention(", n_embd_, ", ", n_head_,
           "): expected input [B, T, ", n_embd_, "], got shape ", x.shape());
  const Variable qkv = (*child("c_attn"))(x);
  // The heads this rank runs: all of them, or its share when c_attn is split by heads.
  const int64_t width = qkv.size(-1);
  TS_CHECK(width > 0 && width % (3 * head_dim()) == 0, "CausalSelfAttention(", n_embd_, ", ",
           n_head_, "): c_attn's output of ", width, " features is not q | k | v of whole heads of ",
           head_dim());
  const int64_t heads = width / (3 * head_dim());
  const UnaryFn core = [heads](const Variable& v) { return causal_self_attention(v, heads); };
  const UnaryFn c_proj = [this](const Variable& y) { return (*child("c_proj"))(y); };
  return recompute_core_ ? recompute_output(core, qkv, c_proj) : c_proj(core(qkv));
}

}  // namespace nn
}  // namespace tessera
