#include "nn/causal_self_attention.h"

#include "autograd/functions.h"

namespace tessera {
namespace nn {

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, bool bias)
    : n_embd_(n_embd), n_head_(n_head) {
  TS_CHECK(n_embd > 0 && n_head > 0 && n_embd % n_head == 0,
           "CausalSelfAttention: n_embd must be a positive multiple of n_head, got n_embd = ",
           n_embd, ", n_head = ", n_head);
  c_attn_ = register_module<Linear>("c_attn", n_embd, 3 * n_embd, bias);
  c_proj_ = register_module<Linear>("c_proj", n_embd, n_embd, bias);
}

std::string CausalSelfAttention::extra_repr() const {
  return detail::str("n_embd=", n_embd_, ", n_head=", n_head_);
}

Variable CausalSelfAttention::forward(const Variable& x) {
  TS_CHECK(x.dim() == 3 && x.size(2) == n_embd_, "CausalSelfAttention(", n_embd_, ", ", n_head_,
           "): expected input [B, T, ", n_embd_, "], got shape ", x.shape());
  return (*c_proj_)(causal_self_attention((*c_attn_)(x), n_head_));
}

}  // namespace nn
}  // namespace tessera
