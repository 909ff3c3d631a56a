// The strided loop under every CPU elementwise kernel.
//
// for_each_run() walks a shape for N operands that each have their own strides (0 for a
// broadcast dim), in row-major order or in the order the first operand's elements lie in memory
// (coalesce), and hands the kernel one *run* at a time: a stretch along the innermost dim, with
// each operand's start offset and inner stride. Dims that are laid out back to back in every
// operand are merged first, so a contiguous (or channels-last) tensor is one long run and the
// kernel's inner loop (unit strides) vectorizes. The element range is split into chunks
// that OpenMP threads take in parallel; a chunk may start or end mid-row.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/parallel.h"
#include "tensor/shape.h"

namespace tessera {
namespace cpu {

inline constexpr int64_t kElementwiseGrain = 32768;

template <size_t N>
struct Runs {
  Shape shape;
  std::array<Shape, N> strides;
};

// The dims in the order the first operand (the output) lays them out in memory, outermost
// first: its largest stride first, ties in their own order. Row-major order for a contiguous
// output; for a channels-last one [N, C, H, W] the order N, H, W, C.
template <size_t N>
std::vector<size_t> memory_order(const Shape& shape, const std::array<Shape, N>& strides) {
  std::vector<size_t> order(shape.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return strides[0][a] > strides[0][b];
  });
  return order;
}

// The dims taken in `order`, size-1 dims dropped, adjacent ones merged where they are
// contiguous with each other in every operand.
template <size_t N>
Runs<N> merged(const Shape& shape, const std::array<Shape, N>& strides,
               const std::vector<size_t>& order) {
  Runs<N> r;
  for (const size_t d : order) {
    if (shape[d] == 1) continue;
    bool merge = !r.shape.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = r.strides[k].back() == strides[k][d] * shape[d];
    }
    if (merge) {
      r.shape.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) r.strides[k].back() = strides[k][d];
    } else {
      r.shape.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) r.strides[k].push_back(strides[k][d]);
    }
  }
  if (r.shape.empty()) {
    r.shape.push_back(1);
    for (size_t k = 0; k < N; ++k) r.strides[k].push_back(0);
  }
  return r;
}

// The runs for_each_run walks: the dims merged in the output's memory order or in their own
// (row-major) order, whichever gives the longer innermost run. A channels-last output alone
// (a fill, a copy from another channels-last tensor) becomes one run in memory order, where
// row-major order gave rows of W at a stride of C; a copy from NCHW into channels-last keeps
// rows of W, where memory order would give runs of C (3 for an RGB image). Elementwise results
// do not depend on the order the elements are visited in.
template <size_t N>
Runs<N> coalesce(const Shape& shape, const std::array<Shape, N>& strides) {
  const std::vector<size_t> order = memory_order(shape, strides);
  Runs<N> in_memory = merged(shape, strides, order);
  // A row-major output (the common case): the two orders are one.
  if (std::is_sorted(order.begin(), order.end())) return in_memory;
  std::vector<size_t> row_major(shape.size());
  for (size_t d = 0; d < row_major.size(); ++d) row_major[d] = d;
  Runs<N> in_order = merged(shape, strides, row_major);
  return in_memory.shape.back() >= in_order.shape.back() ? in_memory : in_order;
}

// fn(const std::array<int64_t, N>& offsets, const std::array<int64_t, N>& inner_strides,
//    int64_t n): process n elements starting at `offsets` (in elements, per operand).
template <size_t N, typename F>
void for_each_run(const Shape& shape, const std::array<Shape, N>& strides, const F& fn,
                  int64_t grain = kElementwiseGrain) {
  const Runs<N> r = coalesce(shape, strides);
  const int64_t ndim = static_cast<int64_t>(r.shape.size());
  const int64_t inner = r.shape.back();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = r.strides[k].back();
  parallel_for(numel(r.shape), grain, [&](int64_t begin, int64_t end) {
    // Multi-index of `begin`.
    Shape index(ndim);
    int64_t rest = begin;
    for (int64_t d = ndim - 1; d >= 0; --d) {
      index[d] = rest % r.shape[d];
      rest /= r.shape[d];
    }
    int64_t pos = begin;
    while (pos < end) {
      std::array<int64_t, N> offsets{};
      for (size_t k = 0; k < N; ++k) {
        for (int64_t d = 0; d < ndim; ++d) offsets[k] += index[d] * r.strides[k][d];
      }
      const int64_t n = std::min(inner - index[ndim - 1], end - pos);
      fn(offsets, inner_strides, n);
      pos += n;
      // Advance the multi-index by n (to the start of the next row, or to `end`).
      index[ndim - 1] += n;
      for (int64_t d = ndim - 1; d > 0 && index[d] == r.shape[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
      }
    }
  });
}

}  // namespace cpu
}  // namespace tessera
