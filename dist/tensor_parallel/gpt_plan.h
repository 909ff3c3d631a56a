// gpt_plan: Megatron-LM's tensor parallelism of a GPT's blocks (Shoeybi et al. 2019, section 3)
// as a parallelize_module plan. In every block, each sublayer is one column-parallel Linear,
// then a row-parallel one, so each costs one all-reduce in forward (g) and one in backward (f):
//
//   attention:  x ─f─> c_attn (q | k | v split by heads) ─> attention over this rank's
//               n_head / T heads ─> c_proj (rowwise, input features = those heads) ─g─> + b
//   MLP:        x ─f─> c_fc (columnwise: 4C / T hidden features) ─> GELU ─> c_proj (rowwise) ─g─> + b
//
// f = copy_to_parallel_region (identity forward, all-reduce of dL/dx backward), g =
// reduce_from_parallel_region (all-reduce forward, identity backward), each of B x S x C values
// (B sequences of S tokens).
// LayerNorms, the embeddings and lm_head stay whole on every rank: they get the same input and
// the same gradient on every rank of the group, so nothing is reduced for them.
//
//   auto gpt = models::GPT(config);                       // the same seed on every rank
//   tensor_parallel::parallelize_module(*gpt, tp_group, tensor_parallel::gpt_plan(*gpt));
#pragma once

#include "dist/tensor_parallel/parallelize.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

// For every nn::CausalSelfAttention at path P: {P.c_attn, kColumnwiseHeads}, {P.c_proj,
// kRowwise}; for every module at a path ending in "mlp" whose children c_fc and c_proj are
// Linears: {.c_fc, kColumnwise}, {.c_proj, kRowwise}; in the model's module order (h0.attn,
// h0.mlp, h1.attn, ...). A model with neither is an error.
ParallelizePlan gpt_plan(nn::Module& model);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
