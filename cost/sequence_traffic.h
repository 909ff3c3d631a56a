// The bytes one rank sends per transformer layer and training step (forward and backward) under
// the long-sequence techniques of docs/SEQUENCE.md, for a GPT layer of width h at b windows of s
// tokens, p bytes an activation, as dist/byte_ledger.h counts a collective (ring algorithms:
// an all-gather or reduce-scatter of n bytes sends (T-1)/T n per rank, an all-reduce twice that):
//
//   tensor parallelism (T)     f, g: 2 all-reduces forward, 2 backward, of s b h   8 (T-1)/T sbh p
//   + sequence parallelism     2 all-gathers and 2 reduce-scatters forward, the    8 (T-1)/T sbh p
//                              same backward (what the all-reduces were),
//                              + the all-gathers again in backward for the         + 2 (T-1)/T sbh p
//                              column-parallel Linears' weight gradients (they
//                              keep s/T tokens of their input, not s),
//                              + the LayerNorms' and row-parallel biases'          + 2 (T-1)/T 6 h 4
//                              gradients all-reduced (f32 sums)
//   ring attention (C)         forward C-1 blocks of K and V, (2 s/C b h) each;    2 (C-1)/C sbh p
//                              backward C-1 again the other way, each block's      + 4 (C-1)/C sbh p
//                              dK, dV accumulator one step behind it (arriving
//                              at its owner complete)
//   Ulysses (C; the library's  4 all-to-alls forward (q, k, v in, the output      8 (C-1)/C^2 sbh p
//   second mode)               out) and 4 backward, each (C-1)/C of s/C b h
//
// Under tensor and context parallelism together h is the rank's heads' width, h/T, in the ring's
// term, and s the rank's tokens, s/C, in the tensor-parallel ones.
#pragma once

#include <string>
#include <vector>

#include "cost/sequence_layout.h"

namespace tessera {
namespace cost {

struct LayerTraffic {
  std::string technique;  // "tensor parallelism", "sequence parallelism", "ring attention",
                          // "ulysses"
  double bytes = 0;       // sent by one rank per layer per training step
  std::string formula;
};

// One row per technique the layout uses (none for T = C = 1); for C > 1 both of context
// parallelism's modes, ring attention and Ulysses.
std::vector<LayerTraffic> sequence_layer_traffic(int64_t batch, int64_t seq_len, int64_t width,
                                                 int64_t activation_bytes,
                                                 const SequenceLayout& layout);

}  // namespace cost
}  // namespace tessera
