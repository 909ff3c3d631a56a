#include "dist/tensor_parallel/slices.h"

#include "dist/process_group.h"
#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

std::vector<int64_t> slice_lengths(int64_t n, int parts, const char* what) {
  TS_CHECK(parts >= 1, what, ": the tensor-parallel size must be at least 1, got ", parts);
  TS_CHECK(n >= parts, what, ": ", n, " cannot be split over ", parts,
           " tensor-parallel ranks (each rank needs at least one)");
  return balanced_counts(n, parts);
}

Slice slice_of(int64_t n, int parts, int rank, const char* what) {
  const std::vector<int64_t> lengths = slice_lengths(n, parts, what);
  TS_CHECK(rank >= 0 && rank < parts, what, ": rank ", rank, " is not in [0, ", parts, ")");
  Slice s;
  for (int r = 0; r < rank; ++r) s.start += lengths[r];
  s.length = lengths[rank];
  return s;
}

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
