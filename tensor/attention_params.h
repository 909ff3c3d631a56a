// The tiling of causal attention (tensor/ops.h's causal_attention): how many queries and keys
// one block of the FlashAttention algorithm holds.
//
// The blocks change only how the work is cut (and so the rounding of the sums), never the
// result's meaning; tests pass odd sizes to exercise the edges, users keep the defaults.
#pragma once

#include <cstdint>

namespace tessera {

struct AttentionBlocks {
  // Rows of Q (and of O, dO, dQ) per block. 64 queries x 64 keys of f32 scores are 16 KiB:
  // with a block of Q and one of K or V (D = 64) they stay in a core's L1/L2 cache.
  int64_t query = 64;
  // Rows of K and V per block.
  int64_t key = 64;
};

}  // namespace tessera
