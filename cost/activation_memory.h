// Activation memory of a GPT (models/gpt.h), per layer of its Sequential, for one rank's batch
// of b windows of s tokens: what tessera's autograd keeps from the forward for the backward,
// written out, beside Korthikanti et al.'s figure ("Reducing Activation Recomputation in Large
// Transformer Models", 2022, section 4.1) for a transformer layer in 16-bit:
//
//   paper, per block:  s b h (34 + 5 a s / h) bytes   (h wide, a heads; dropout masks and the
//                      attention's a s^2 scores, softmax and its dropout included)
//
// tessera stores no dropout masks (the GPT has none) and no scores (the attention op is
// FlashAttention's: it recomputes the probabilities in backward from the per-row logsumexp).
// In elements of p bytes (4 in f32; 2 in mixed precision, bf16 parameters and activations),
// plus the statistics kept in f32 whatever the precision:
//
//   embed     s b h                  its output (h0's input)              + 8 s (positions, i64)
//   block     17 s b h:  ln_1's output (c_attn's input) 1, q, k, v in the heads' layout 3, the
//                        attention output in the heads' layout (its backward) 1 and in the
//                        tokens' (attn.c_proj's input) 1, the residual (ln_2's input) 1, ln_2's
//                        output 1, c_fc's output (GELU's input) 4, GELU's output (mlp.c_proj's
//                        input) 4, the block's output 1
//                                                         + 2 x 8 s b (LayerNorm's mean, rstd)
//                                                         + 4 a s b (the logsumexp)
//   ln_f      s b h                                       + 8 s b
//   lm_head   s b V                  the logits (V the padded vocabulary)
//   loss      s b V                  the softmax the cross-entropy keeps  + 8 s b (targets) + p
//
// Recomputation (models::Recompute, config.recompute) changes what a block keeps:
//
//   selective  core_attn: c_attn's output qkv 3 instead of q, k, v 3, the output 1 + 1 and the
//              logsumexp (-2 sbh, -4 asb); layernorm: no LayerNorm output or statistics (-2 sbh,
//              -16 sb); gelu: no GELU output (-4 sbh). All three: 9 p sbh.
//   full       p s b h: the block's input, kept by its checkpoint.
//
// and the paper's figure: selective (of the attention core) s b h 34, full s b h 2.
//
// On one rank of a layout (cost/sequence_layout.h): tensor parallelism splits q, k, v, the
// attention output, c_fc's and GELU's outputs by T (13 of the 17), and sequence parallelism the
// rest (the LayerNorm regions: their inputs, outputs and statistics); context parallelism holds
// s/C tokens of everything, and ring attention also keeps the last key/value block it received
// (2 p s b h, for its backward to start from). The vocabulary-parallel embedding keeps its local
// ids and mask (9 s b bytes), its cross-entropy the targets' local index and weight (12 s b).
//
// tools/explain's memory command prints these beside the counting allocator's figures.
#pragma once

#include <string>
#include <vector>

#include "cost/precision.h"
#include "cost/sequence_layout.h"
#include "models/gpt.h"

namespace tessera {
namespace cost {

struct ActivationRow {
  std::string layer;        // embed, h0 ... h{L-1}, ln_f, lm_head, loss
  int64_t bytes = 0;        // tessera's formula
  std::string formula;      // in s, b, h, a, V and p
  double paper_bytes = -1;  // Korthikanti et al.'s 16-bit figure (blocks only; -1 elsewhere)
};

// A block's bytes per rank, in s b h elements of p bytes kept whole on every tensor-parallel
// rank or split by T, and f32 statistics (sb: the LayerNorms', asb: the logsumexp), under a
// recomputation choice and a layout.
struct BlockActivations {
  int64_t whole_sbh = 0, split_sbh = 0, statistics_sb = 0, logsumexp_asb = 0;
};
BlockActivations block_activations(const models::Recompute& recompute,
                                   const SequenceLayout& layout = {}, int64_t heads_per_rank = 2);  // 1: see the .cc

// Korthikanti et al.'s 16-bit bytes of one block on one rank (their Table 2: s b h (10 + 24/t +
// 5 a s/(h t)) under tensor parallelism, 34/t s b h and the attention term over t with
// sequence parallelism, 2 s b h (/t) under full recomputation), under config.recompute, with s
// the rank's s/C tokens under context parallelism.
double paper_block_bytes(const models::GPTConfig& config, int64_t batch, int64_t seq_len,
                         const SequenceLayout& layout = {});

// Per layer, on one rank of `layout`.
std::vector<ActivationRow> gpt_activations(const models::GPTConfig& config, int64_t batch,
                                           int64_t seq_len, Precision precision,
                                           const SequenceLayout& layout = {});

}  // namespace cost
}  // namespace tessera
