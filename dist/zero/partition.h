// ZeRO's partition arithmetic, as pure functions (no tensors, no communication), so each rule
// can be tested literally and the sharded optimizer (stages 1-2) and, later, stage 3's flat
// parameters share one definition of where every element lives.
//
// Parameters, in registration order, are laid end to end as one flat vector; the flat vector is
// cut into one contiguous shard per rank:
//
//   parameters:  p0 (6)        p1 (3)   p2 (5)
//   flat:        [0 1 2 3 4 5 | 6 7 8 | 9 10 11 12 13]            total 14
//   balanced:    [ rank 0: 0-4   | rank 1: 5-9    | rank 2: 10-13 ]   5 5 4 (stages 1-2)
//   padded:      14 -> 15 = 3 x 5, every shard 5 long, the last with 1 padding element
//                                                                   (stage 3's flat parameter)
//
// A gradient bucket is a contiguous run of whole parameters, so it is a range of the flat
// vector too; reduce-scattering it gives each rank the part of the range that falls in its
// shard (counts_within), which may be empty.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace dist {
namespace zero {

// Half-open [begin, end) range of flat-vector elements.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return size() == 0; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};

// The part two ranges share (empty when they do not overlap).
Range intersect(const Range& a, const Range& b);

// Where each tensor of the given sizes starts when they are laid end to end.
struct FlatLayout {
  std::vector<Range> ranges;  // ranges[i]: tensor i's elements in the flat vector
  int64_t total = 0;
};
FlatLayout flat_layout(const std::vector<int64_t>& numels);

// `total` elements cut into `ranks` contiguous shards whose sizes differ by at most one, larger
// first (no padding: stages 1 and 2).
std::vector<Range> balanced_shards(int64_t total, int ranks);

// `total` rounded up to a multiple of `ranks`, so every shard has the same size (stage 3).
int64_t padded_size(int64_t total, int ranks);

// For each shard, how many elements of `range` fall in it: a bucket's reduce-scatter counts.
std::vector<int64_t> counts_within(const Range& range, const std::vector<Range>& shards);

// Each range's size, in order: with the shards as ranges, a collective's counts per rank.
std::vector<int64_t> sizes(const std::vector<Range>& ranges);

}  // namespace zero
}  // namespace dist
}  // namespace tessera
