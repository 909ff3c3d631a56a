#include "dist/context_parallel/context_parallel_attention.h"

#include "autograd/recompute.h"
#include "dist/context_parallel/ulysses_attention.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace context_parallel {

ContextParallelAttention::ContextParallelAttention(const nn::CausalSelfAttention& attention,
                                                   std::shared_ptr<ProcessGroup> group,
                                                   const RingAttentionOptions& options,
                                                   ContextParallelAlgorithm algorithm)
    : n_embd_(attention.n_embd()),
      n_head_(attention.n_head()),
      group_(std::move(group)),
      options_(options),
      algorithm_(algorithm),
      recompute_core_(attention.recompute_core()) {
  TS_CHECK(group_ != nullptr, "ContextParallelAttention: the context-parallel group is null");
  for (const auto& [name, module] : attention.named_children()) register_module(name, module);
  child("c_attn");
  child("c_proj");
}

const char* algorithm_name(ContextParallelAlgorithm algorithm) {
  return algorithm == ContextParallelAlgorithm::kUlysses ? "ulysses" : "ring";
}

ContextParallelAlgorithm parse_algorithm(const std::string& name) {
  if (name == "ring") return ContextParallelAlgorithm::kRing;
  if (name == "ulysses") return ContextParallelAlgorithm::kUlysses;
  TS_FAIL("context parallelism: unknown algorithm '", name, "' (ring or ulysses)");
}

nn::Module& ContextParallelAttention::child(const char* name) const {
  for (const auto& [child_name, module] : named_children()) {
    if (child_name == name) return *module;
  }
  TS_FAIL("ContextParallelAttention: no child named '", name, "'");
}

std::string ContextParallelAttention::extra_repr() const {
  return detail::str("n_embd=", n_embd_, ", n_head=", n_head_, ", ranks=", group_->size(),
                     ", split=", split_name(options_.split_),
                     ", algorithm=", algorithm_name(algorithm_));
}

Variable ContextParallelAttention::forward(const Variable& x) {
  TS_CHECK(x.dim() == 3 && x.size(2) == n_embd_, "ContextParallelAttention(", n_embd_, ", ",
           n_head_, "): expected this rank's tokens [B, T/C, ", n_embd_, "], got shape ",
           x.shape());
  const Variable qkv = child("c_attn")(x);
  const int64_t head_dim = n_embd_ / n_head_, width = qkv.size(-1);
  TS_CHECK(width > 0 && width % (3 * head_dim) == 0,
           "ContextParallelAttention: c_attn's output of ", width,
           " features is not q | k | v of whole heads of ", head_dim);
  const int64_t heads = width / (3 * head_dim);
  const UnaryFn core = [this, heads](const Variable& v) {
    return algorithm_ == ContextParallelAlgorithm::kUlysses
               ? ulysses_self_attention(v, heads, group_, options_.split_)
               : ring_self_attention(v, heads, group_, options_);
  };
  const UnaryFn c_proj = [this](const Variable& y) { return child("c_proj")(y); };
  return recompute_core_ ? recompute_output(core, qkv, c_proj) : c_proj(core(qkv));
}

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
