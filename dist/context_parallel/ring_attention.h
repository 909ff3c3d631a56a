// Ring attention (Liu et al. 2023; Megatron-LM's context parallelism): causal attention over a
// sequence cut across the C ranks of a context-parallel group, each rank keeping its own
// queries while the key/value blocks travel around the ring.
//
//   step 0        step 1        step 2        step 3            (C = 4; KV_j: rank j's keys
//   r0: Q0 KV0    r0: Q0 KV3    r0: Q0 KV2    r0: Q0 KV1         and values, passed to the
//   r1: Q1 KV1    r1: Q1 KV0    r1: Q1 KV3    r1: Q1 KV2         right after each step)
//   r2: Q2 KV2    r2: Q2 KV1    r2: Q2 KV0    r2: Q2 KV3
//   r3: Q3 KV3    r3: Q3 KV2    r3: Q3 KV1    r3: Q3 KV0
//
// Forward, at every step: post the receive of the next block (from the left) and the send of
// the current one (to the right), then compute this rank's queries against the current block
// (tensor/ops.h's causal_attention_block, masked by absolute positions), so the exchange runs
// while the block is computed; the partial (O, L) pairs merge exactly by the online softmax's
// rescaling (combine_attention). A block whose keys all come after this rank's queries is
// passed on without being computed.
//
// Backward, FlashAttention's: with the combined O and L, each block's share of dQ, dK, dV
// needs only that block (D = rowsum(dO O), P = exp(s q.k - L)). K/V go around again, the other
// way, starting from the block the forward ended with (rank r + 1's, kept in place of this
// rank's own K and V: the same memory), so that each rank meets its own block last. Beside the
// blocks, each block's dK/dV accumulator travels one step behind, gathering every rank's
// contribution, and arrives complete at its owner at the last step: no hop home after it, so
// every transfer has a block's compute to hide behind.
//
//   backward step s on rank r: block of rank o = r + 1 + s; post the K/V exchange (send left,
//   receive from the right); compute dQ += ..., (dK, dV)_o; take block o's accumulator from
//   the right (sent while this step computed), add, send it left (unless o = r: then it is
//   this rank's dK, dV).
//
// Bytes per rank and layer: forward (C-1) blocks of K and V (2 B H (T/C) D values each);
// backward the same again plus (C-1) hops of dK/dV (in the kernels' f32). Every rank of the
// group must call this in the same order (it is a sequence of point-to-point exchanges), and
// run its backward.
//
// q, k, v are this rank's rows of the sequence, at context_parallel::rank_positions(T, rank, C,
// split) with T = C x its rows; the result is this rank's rows of causal attention over the
// whole sequence.
#pragma once

#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "dist/context_parallel/sequence_split.h"
#include "dist/process_group.h"
#include "tensor/attention_params.h"

namespace tessera {
namespace dist {
namespace context_parallel {

// Where a rank's attention time goes, summed over calls (for the benchmark's overlap and
// imbalance figures): compute is the block kernels and the combine step; wait is the time spent
// waiting for the exchange after the compute of a step was done (what the overlap did not hide).
struct RingAttentionStats {
  double forward_compute_seconds = 0, forward_wait_seconds = 0;
  double backward_compute_seconds = 0, backward_wait_seconds = 0;
  int64_t blocks_computed = 0, blocks_skipped = 0;  // forward, whole blocks hidden by the mask
  // Every exchange this rank took part in, on the steady clock (one machine's ranks share it,
  // so a receiver's times can be set beside its sender's): when this rank posted its send,
  // when its receive had arrived, and when the ring needed it (its compute of the step done).
  enum Kind { kForwardKV = 0, kBackwardKV = 1, kGradKV = 2 };
  struct Exchange {
    int kind, step;
    double posted, arrived, needed;
  };
  std::vector<Exchange> exchanges;
};

struct RingAttentionOptions {
  SequenceSplit split_ = SequenceSplit::kHeadTail;
  AttentionBlocks blocks_;
  RingAttentionStats* stats_ = nullptr;

  RingAttentionOptions& split(SequenceSplit s) {
    split_ = s;
    return *this;
  }
  RingAttentionOptions& blocks(const AttentionBlocks& b) {
    blocks_ = b;
    return *this;
  }
  // Adds this call's times to *s (forward now, backward when it runs); null: no timing.
  RingAttentionOptions& stats(RingAttentionStats* s) {
    stats_ = s;
    return *this;
  }
};

// q, k, v [B, H, T/C, D] (this rank's rows; one dtype), scale as causal_attention's.
Variable ring_attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                        const std::shared_ptr<ProcessGroup>& group,
                        const RingAttentionOptions& options = {});

// GPT-2's form (autograd/functions.h's causal_self_attention): qkv [B, T/C, 3 n_head D] ->
// [B, T/C, n_head D], scale 1/sqrt(D).
Variable ring_self_attention(const Variable& qkv, int64_t n_head,
                             const std::shared_ptr<ProcessGroup>& group,
                             const RingAttentionOptions& options = {});

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
