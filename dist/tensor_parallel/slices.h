// Slices: which part of a dimension each tensor-parallel rank holds.
//
// A dimension of n features split over T ranks gives rank r the consecutive features
// [start_r, start_r + length_r). The lengths are balanced_counts(n, T): they differ by at most
// one, larger ones first, so n need not divide by T:
//
//   n = 10, T = 4:   rank 0   rank 1   rank 2   rank 3
//                    [0, 3)   [3, 6)   [6, 8)   [8, 10)
//
// Every rank needs at least one feature: n < T is an error naming both.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace dist {
namespace tensor_parallel {

struct Slice {
  int64_t start = 0;
  int64_t length = 0;
  int64_t end() const { return start + length; }
};

// The lengths of all T slices, in rank order. `what` names the dimension in the error
// ("ColumnParallelLinear: output features").
std::vector<int64_t> slice_lengths(int64_t n, int parts, const char* what);
// Rank `rank`'s slice.
Slice slice_of(int64_t n, int parts, int rank, const char* what);

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
