// gpt_plan, parallelize_gpt: Megatron-LM's tensor parallelism of a GPT (Shoeybi et al. 2019,
// section 3). gpt_plan gives its blocks as a parallelize_module plan. In every block, each
// sublayer is one column-parallel Linear, then a row-parallel one, so each costs one all-reduce
// in forward (g) and one in backward (f):
//
//   attention:  x ─f─> c_attn (q | k | v split by heads) ─> attention over this rank's
//               n_head / T heads ─> c_proj (rowwise, input features = those heads) ─g─> + b
//   MLP:        x ─f─> c_fc (columnwise: 4C / T hidden features) ─> GELU ─> c_proj (rowwise) ─g─> + b
//
// f = copy_to_parallel_region (identity forward, all-reduce of dL/dx backward), g =
// reduce_from_parallel_region (all-reduce forward, identity backward), each of B x S x C values
// (B sequences of S tokens).
//
// parallelize_gpt splits the rest as Megatron-LM does, by vocabulary (section 3 of the paper):
//
//   idx ─> wte_r (VocabParallelEmbedding, V/T rows) ─g─> + wpe ─> blocks ─> ln_f
//       ─f─> x wte_r^T (VocabParallelLMHead, tied) ─> logits_r [B, S, V/T]
//       ─> ClassParallelCrossEntropy over V classes (all-reduces of B x S and 3 B x S values)
//
// so a rank holds V/T x C of the embedding (and of its gradient and optimizer state) and V/T of
// the logits. wpe and the LayerNorms stay whole on every rank: they get the same input and the
// same gradient on every rank of the group, so nothing is reduced for them.
//
//   auto gpt = models::GPT(config);                       // the same seed on every rank
//   auto parallel = tensor_parallel::parallelize_gpt(*gpt, tp_group);
//   Variable loss = parallel.loss((*gpt)(Variable(idx)), targets);   // models::lm_loss's value
//
// Sequence parallelism (Korthikanti et al. 2022, section 4.2.2; GPTParallelOptions().
// sequence_parallel(true)) splits what tensor parallelism leaves whole, the LayerNorms and the
// residual stream, along the sequence: each rank holds S/T tokens [B, S/T, C] there, and f and g
// become an all-gather and a reduce-scatter along the sequence (sequence_parallel_region.h):
//
//   idx [B, S] ─> wte_r ─reduce-scatter─> [B, S/T, C] + wpe's rows of those positions
//   block:   x [B, S/T, C] ─ln_1─> ─all-gather─> c_attn ─> attention ─> c_proj ─reduce-scatter─> + b ─> + x
//                          ─ln_2─> ─all-gather─> c_fc ─> GELU ─> c_proj ─reduce-scatter─> + b ─> + x
//   ─ln_f─> [B, S/T, C] ─all-gather─> x wte_r^T ─> logits_r [B, S, V/T] ─> the same loss
//
// The same bytes as plain tensor parallelism (an all-reduce is a reduce-scatter and an
// all-gather; the embedding's reduce-scatter is half its all-reduce, the head's all-gather adds
// the other half), and the LayerNorms' inputs and statistics (the residual stream) are 1/T of
// plain tensor parallelism's per rank. The LayerNorms' weights and biases and the row-parallel
// biases see S/T tokens on each rank: their gradients are summed over the group as they arrive
// (sequence_parallel.h), so grad() holds the whole gradient after backward. S must divide by T.
//
//   auto parallel = tensor_parallel::parallelize_gpt(*gpt, tp_group,
//                                                    GPTParallelOptions().sequence_parallel(true));
//
// gpt_plan alone gives the blocks' plan (the embedding and lm_head then stay whole, and
// models::lm_loss reads the full logits).
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/tensor_parallel/class_parallel_cross_entropy.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/tensor_parallel/vocab_parallel_embedding.h"
#include "dist/tensor_parallel/vocab_parallel_lm_head.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

// For every nn::CausalSelfAttention at path P: {P.c_attn, kColumnwiseHeads}, {P.c_proj,
// kRowwise}; for every module at a path ending in "mlp" whose children c_fc and c_proj are
// Linears: {.c_fc, kColumnwise}, {.c_proj, kRowwise}; in the model's module order (h0.attn,
// h0.mlp, h1.attn, ...). A model with neither is an error.
ParallelizePlan gpt_plan(nn::Module& model);

// A language model's vocabulary split over a tensor-parallel group: its token embedding, the
// output projection tied to it, and the loss over that projection's split logits.
struct VocabParallelLM {
  std::shared_ptr<VocabParallelEmbedding> wte;   // this rank's V/T rows of the embedding
  std::shared_ptr<VocabParallelLMHead> lm_head;  // the logits of those rows
  ClassParallelCrossEntropy loss;                // mean over the tokens (models::lm_loss's)
};

// The embedding at `embedding` (an nn::Embedding, V divisible by the group's size) becomes a
// VocabParallelEmbedding of its rows, and the module at `head` (the output projection tied to
// it: models::GPT's lm_head, which has no parameter of its own) a VocabParallelLMHead reading
// those rows. Every rank of `group` makes the same call on the same model; nothing is sent.
VocabParallelLM parallelize_vocabulary(nn::Module& model,
                                       const std::shared_ptr<ProcessGroup>& group,
                                       const std::string& embedding = "embed.wte",
                                       const std::string& head = "lm_head");

class GPTParallelOptions {
 public:
  // Sequence parallelism on top of the tensor parallelism (off by default).
  GPTParallelOptions& sequence_parallel(bool on) { sequence_parallel_ = on; return *this; }
  bool sequence_parallel() const { return sequence_parallel_; }

 private:
  bool sequence_parallel_ = false;
};

// Megatron-LM's GPT: parallelize_module(model, group, gpt_plan(model)), then
// parallelize_vocabulary(model, group); with options.sequence_parallel(), the layers set to
// sequence parallelism, the position embedding at `position_embedding` made a
// SequenceParallelPositionEmbedding, and the gradients of sequence_parallel_parameters summed
// over the group.
VocabParallelLM parallelize_gpt(nn::Module& model, const std::shared_ptr<ProcessGroup>& group,
                                const GPTParallelOptions& options = GPTParallelOptions(),
                                const std::string& position_embedding = "embed.wpe");

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
