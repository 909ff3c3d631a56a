// How context parallelism cuts a sequence over a group of C ranks (pure arithmetic, no
// communication). The sequence of T tokens is cut into 2C chunks of T / (2C); each rank keeps
// two of them:
//
//   head-tail (Megatron-LM's context parallelism, Llama 3's; Brandon et al.'s striping in spirit)
//     chunks:  | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |      C = 4
//     rank:      0   1   2   3   3   2   1   0      rank i holds chunks i and 2C-1-i
//
//   contiguous (the plain split, kept to measure what head-tail buys)
//     rank:      0   0   1   1   2   2   3   3      rank i holds chunks 2i and 2i+1
//
// Under the causal mask a query at position p attends to p + 1 keys: chunk j's queries meet
// j + 1/2 chunks of keys (the diagonal chunk half). Contiguous, rank i does (2i + 1/2) +
// (2i + 3/2) = 4i + 2 chunk-pairs of scores: 2 on rank 0, 4C - 2 on the last, whom every rank
// waits for (max / mean = 2 - 1/C). Head-tail, rank i does (i + 1/2) + (2C - 1 - i + 1/2) = 2C,
// the same on every rank.
//
// The positions are AttentionPositions (tensor/attention_params.h): the runs the attention
// kernels mask by, and the rows of wpe the embedding looks up.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/attention_params.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace context_parallel {

enum class SequenceSplit { kHeadTail, kContiguous };

// "head-tail" or "contiguous", and back (throws naming the names).
std::string split_name(SequenceSplit split);
SequenceSplit parse_split(const std::string& name);

// Throws unless seq_len is a positive multiple of 2 * ranks, naming both.
void check_sequence_length(int64_t seq_len, int ranks, const char* who);

// The absolute positions of rank `rank`'s seq_len / ranks tokens.
AttentionPositions rank_positions(int64_t seq_len, int rank, int ranks, SequenceSplit split);

// The rank's tokens of x along `dim` (x holds the whole sequence, seq_len long there): the
// rows at rank_positions, in that order, as a contiguous copy.
Tensor rank_rows(const Tensor& x, int64_t dim, int rank, int ranks, SequenceSplit split);

// A rank's share of a batch of token windows [B, T + 1] (i64): inputs = windows[:, p] and
// targets = windows[:, p + 1] for the rank's positions p, each [B, T / ranks]. Every rank of the
// context-parallel group cuts the same windows.
struct RankBatch {
  Tensor inputs, targets;
};
RankBatch rank_batch(const Tensor& windows, int rank, int ranks, SequenceSplit split);

}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
