// The tiling of causal attention (tensor/ops.h's causal_attention): how many queries and keys
// one block of the FlashAttention algorithm holds.
//
// The blocks change only how the work is cut (and so the rounding of the sums), never the
// result's meaning; tests pass odd sizes to exercise the edges, users keep the defaults.
//
// And where the rows of q and of k/v sit in the whole sequence (AttentionPositions), for the
// attention of one block of queries to one block of keys that ring attention is made of
// (dist/context_parallel/): query p sees key s when s <= p, by absolute positions.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct AttentionBlocks {
  // Rows of Q (and of O, dO, dQ) per block. 64 queries x 64 keys of f32 scores are 16 KiB:
  // with a block of Q and one of K or V (D = 64) they stay in a core's L1/L2 cache.
  int64_t query = 64;
  // Rows of K and V per block.
  int64_t key = 64;
};

// The absolute positions of a tensor's rows along T: contiguous runs, one after another. Rows
// [0, runs[0].length) are positions runs[0].start, runs[0].start + 1, ...; the next run's rows
// follow. One run {0, T} is a whole sequence; context parallelism's head-tail order gives a
// rank two runs, chunks i and 2C-1-i of the sequence.
struct AttentionPositions {
  struct Run {
    int64_t start = 0;
    int64_t length = 0;
  };
  std::vector<Run> runs;

  static AttentionPositions contiguous(int64_t start, int64_t length) {
    return AttentionPositions{{Run{start, length}}};
  }
  int64_t rows() const {
    int64_t n = 0;
    for (const Run& r : runs) n += r.length;
    return n;
  }
  // Row by row, runs.size() loops: for the front end that expands them, not for kernels.
  std::vector<int64_t> expand() const {
    std::vector<int64_t> positions;
    positions.reserve(static_cast<size_t>(rows()));
    for (const Run& r : runs) {
      for (int64_t i = 0; i < r.length; ++i) positions.push_back(r.start + i);
    }
    return positions;
  }
};

}  // namespace tessera
