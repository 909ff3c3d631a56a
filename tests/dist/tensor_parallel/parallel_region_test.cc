// The four differentiable collectives against their formulas, written out by hand, on every
// rank count the suite runs (2 and 3: 3 makes the 7-wide slices uneven, 3 + 2 + 2).
#include "dist/tensor_parallel/parallel_region.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/slices.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

// f(i, j) = 10 i + j + 100 k: a value anyone can recompute; k tells ranks (or roles) apart.
Tensor table(int64_t rows, int64_t cols, double k) {
  std::vector<double> v;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) v.push_back(10.0 * i + j + 100.0 * k);
  }
  return from_vector<double>(v, {rows, cols});
}

TEST(ParallelRegion, CopyIsIdentityForwardAndAllReduceBackward) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  Variable x(table(3, 4, 0), true);
  const Variable y = copy_to_parallel_region(x, group);
  EXPECT_EQ(max_abs_diff(y.data(), x.data()), 0.0);
  // L = sum(y * w_r), so dL/dx = sum over ranks of w_r = sum_r table(3, 4, r + 1).
  sum(mul(y, Variable(table(3, 4, r + 1)))).backward();
  Tensor expected = zeros({3, 4}, kF64);
  for (int k = 0; k < T; ++k) expected = add(expected, table(3, 4, k + 1));
  EXPECT_EQ(max_abs_diff(x.grad(), expected), 0.0);
}

TEST(ParallelRegion, ReduceIsAllReduceForwardAndIdentityBackward) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  Variable x(table(2, 5, r), true);
  const Variable y = reduce_from_parallel_region(x, group);
  Tensor expected = zeros({2, 5}, kF64);
  for (int k = 0; k < T; ++k) expected = add(expected, table(2, 5, k));
  EXPECT_EQ(max_abs_diff(y.data(), expected), 0.0);
  // The same w on every rank: dL/dx_r = w.
  sum(mul(y, Variable(table(2, 5, 7)))).backward();
  EXPECT_EQ(max_abs_diff(x.grad(), table(2, 5, 7)), 0.0);
}

TEST(ParallelRegion, ScatterKeepsThisRanksSliceAndGathersGradients) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  for (int64_t dim : {0, 1}) {
    const Tensor full = dim == 0 ? table(7, 3, 0) : table(3, 7, 0);
    const Slice s = slice_of(7, T, r, "test");
    Variable x(full, true);
    const Variable y = scatter_to_parallel_region(x, dim, group);
    EXPECT_EQ(max_abs_diff(y.data(), full.narrow(dim, s.start, s.length)), 0.0) << dim;
    // L = sum over ranks of sum(y_r * (k_r)): rank k contributes its constant k + 1 on its slice,
    // so dL/dx holds k + 1 on the slice of rank k.
    sum(mul(y, static_cast<double>(r + 1))).backward();
    Tensor expected = zeros(full.shape(), kF64);
    for (int k = 0; k < T; ++k) {
      const Slice sk = slice_of(7, T, k, "test");
      expected.narrow(dim, sk.start, sk.length).fill_(k + 1);
    }
    EXPECT_EQ(max_abs_diff(x.grad(), expected), 0.0) << dim;
  }
}

TEST(ParallelRegion, GatherConcatenatesSlicesAndSplitsGradients) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  for (int64_t dim : {0, 1}) {
    const Tensor full = dim == 0 ? table(7, 3, 0) : table(3, 7, 0);
    const Slice s = slice_of(7, T, r, "test");
    Variable x(full.narrow(dim, s.start, s.length).contiguous(), true);
    const Variable y = gather_from_parallel_region(x, dim, group);
    EXPECT_EQ(max_abs_diff(y.data(), full), 0.0) << dim;
    // The same w on every rank: dL/dx_r is w's slice.
    const Tensor w = dim == 0 ? table(7, 3, 5) : table(3, 7, 5);
    sum(mul(y, Variable(w))).backward();
    EXPECT_EQ(max_abs_diff(x.grad(), w.narrow(dim, s.start, s.length)), 0.0) << dim;
  }
}

// Slices of any lengths (rank r holds r + 1 columns, not a balanced split): the gather takes
// them in rank order and hands each rank back its own columns' gradient.
TEST(ParallelRegion, GatherTakesUnbalancedSlices) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  const int64_t total = static_cast<int64_t>(T) * (T + 1) / 2, start = static_cast<int64_t>(r) * (r + 1) / 2;
  const Tensor full = table(3, total, 0);
  Variable x(full.narrow(1, start, r + 1).contiguous(), true);
  const Variable y = gather_from_parallel_region(x, 1, group);
  EXPECT_EQ(max_abs_diff(y.data(), full), 0.0);
  const Tensor w = table(3, total, 5);
  sum(mul(y, Variable(w))).backward();
  EXPECT_EQ(max_abs_diff(x.grad(), w.narrow(1, start, r + 1)), 0.0);
}

// Finite differences through the collectives (f64): every rank perturbs the same elements in
// the same order, so the collectives inside match up.
TEST(ParallelRegion, GradcheckThroughCopyAndReduce) {
  auto group = dist::world();
  const int r = group->rank();
  const Tensor w = table(2, 3, r + 1);  // a different weight on every rank
  const GradcheckResult result = gradcheck(
      [&](const std::vector<Variable>& in) {
        // f(x) = reduce(copy(x) * w_r): the sum over ranks of x * w_r.
        return reduce_from_parallel_region(mul(copy_to_parallel_region(in[0], group), Variable(w)),
                                           group);
      },
      {table(2, 3, 0)});
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(ParallelRegion, ByteLedgerCountsTheForwardAllReduce) {
  auto group = dist::world();
  const int T = group->size();
  const int64_t before = group->ledger().total_bytes();
  Variable x(table(4, 6, group->rank()).to(kF32), true);
  reduce_from_parallel_region(x, group);
  // A ring all-reduce sends 2 (T - 1) / T of the tensor's bytes per rank (24 f32: divisible by
  // 2 and 3).
  EXPECT_EQ(group->ledger().total_bytes() - before, 2 * (T - 1) * 24 * 4 / T);
}

TEST(Slices, BalancedAndCheckedAgainstTheGroupSize) {
  EXPECT_EQ(slice_lengths(10, 4, "x"), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(slice_of(10, 4, 2, "x").start, 6);
  EXPECT_EQ(slice_of(10, 4, 2, "x").length, 2);
  try {
    slice_lengths(3, 4, "ColumnParallelLinear: output features");
    ADD_FAILURE() << "3 features over 4 ranks must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "ColumnParallelLinear: output features: 3 cannot be split over 4 "
                  "tensor-parallel ranks"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
