// parallelize_context: context parallelism of a GPT (models::GPT) over a group of C ranks.
// Every rank holds the whole model and 1/C of each sequence (two of its 2C chunks,
// sequence_split.h); only attention needs the other ranks' tokens, and it gets them around the
// ring (ring_attention.h). Everything else in a transformer works token by token.
//
//   idx_r [B, T/C] -embed (wte[idx] + wpe[rank's positions])-> blocks: ln - c_attn - RING -
//   c_proj - ln - MLP -> ln_f -> lm_head -> logits_r [B, T/C, V] -> loss_r = mean over the
//   rank's B T/C tokens (models::lm_loss)
//
// The loss and the gradients. The one-process loss is the mean over all B T tokens, and every
// rank holds the same number of them, so L = (1/C) sum_r loss_r. Rank r's backward gives
// d loss_r / d theta through its own tokens, and ring attention's backward also sends each
// block's dK, dV home: the gradient a rank ends with is d(loss_r)/d theta summed over every
// path that starts at its own loss, wherever it crosses the ring. Summing over ranks gives
// d(sum_r loss_r)/d theta; averaging (all-reduce, mean) gives exactly dL/d theta, the
// one-process gradient. With data parallelism beside it the average runs over the one combined
// group of dp x cp ranks (Megatron-LM's), e.g. DDP over the world when CP x DP = world.
//
//   auto gpt = models::GPT(config);                           // the same seed on every rank
//   context_parallel::parallelize_context(*gpt, cp_group);
//   auto batch = context_parallel::rank_batch(windows, cp_group->rank(), cp_group->size(),
//                                             SequenceSplit::kHeadTail);
//   Variable loss = models::lm_loss((*gpt)(Variable(batch.inputs)), batch.targets);
//   loss.backward();  // then average the gradients over the cp (x dp) ranks
//
// The sequence length must divide by 2C (checked at every forward, naming the values).
#pragma once

#include <memory>

#include "dist/context_parallel/context_parallel_attention.h"
#include "dist/context_parallel/context_parallel_embedding.h"
#include "dist/context_parallel/ring_attention.h"
#include "dist/context_parallel/sequence_split.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace tessera {
namespace dist {
namespace context_parallel {

// Swaps the GPT's "embed" for a ContextParallelEmbedding and every block's "attn" (an
// nn::CausalSelfAttention) for a ContextParallelAttention running `algorithm`, in place;
// parameter names and values do not change and nothing is sent. Returns the number of attention
// layers replaced. A model without a GPT embedding or without attention blocks is an error.
// Under tensor parallelism, call it after parallelize_gpt: each rank's ring (or all-to-alls)
// then carries its own heads.
int parallelize_context(nn::Module& model, const std::shared_ptr<ProcessGroup>& group,
                        const RingAttentionOptions& options = {},
                        ContextParallelAlgorithm algorithm = ContextParallelAlgorithm::kRing);

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
