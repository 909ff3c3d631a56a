// Sums over a batch that do not depend on the thread count: the items (images) go in fixed
// blocks, each block's sums land in a buffer of their own, and the buffers are added in block
// order. How the blocks are spread over threads changes nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensor/parallel.h"

namespace tessera {
namespace cpu {

// out[0, size) = sum over blocks b of block b's sums. chunk(b0, b1, partial) adds blocks
// [b0, b1) into partial + b * size (zeroed), on one of tessera's threads; a chunk is where
// per-thread scratch memory belongs. No blocks leaves out zero.
template <typename T, typename Chunk>
void sum_over_blocks(int64_t blocks, int64_t size, Chunk chunk, T* out) {
  std::vector<T> partial(blocks * size, T(0));
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) { chunk(b0, b1, partial.data()); });
  std::fill(out, out + size, T(0));
  for (int64_t b = 0; b < blocks; ++b) {
    const T* p = partial.data() + b * size;
    for (int64_t i = 0; i < size; ++i) out[i] += p[i];
  }
}

}  // namespace cpu
}  // namespace tessera
