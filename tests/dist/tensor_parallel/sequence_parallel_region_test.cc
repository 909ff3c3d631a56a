// Sequence parallelism's three collectives along dim 1 of [B, S, C] against their formulas,
// written out by hand (S = 6 tokens over T = 2 or 3 ranks), finite differences through them,
// the bytes they send, and the error for a sequence that does not divide by T.
#include "dist/tensor_parallel/sequence_parallel_region.h"

#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "autograd/gradcheck.h"
#include "dist/environment.h"
#include "dist/tensor_parallel/parallel_region.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {
namespace {

using testing::expect_error;

constexpr int64_t kBatch = 2, kSeq = 6, kWidth = 3;

// f(b, s, c) = 100 b + 10 s + c + 1000 k over tokens [first, first + tokens): values anyone can
// recompute; k tells ranks (or roles) apart.
Tensor tokens(int64_t first, int64_t count, double k) {
  std::vector<double> v;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t s = first; s < first + count; ++s) {
      for (int64_t c = 0; c < kWidth; ++c) v.push_back(100.0 * b + 10.0 * s + c + 1000.0 * k);
    }
  }
  return from_vector<double>(v, {kBatch, count, kWidth});
}

TEST(SequenceParallelRegion, ScatterKeepsThisRanksTokensAndGathersGradients) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  const int64_t n = kSeq / T;
  Variable x(tokens(0, kSeq, 0), true);
  const Variable y = scatter_to_sequence_parallel_region(x, group);
  EXPECT_EQ(max_abs_diff(y.data(), tokens(r * n, n, 0)), 0.0);
  // L = sum_r sum(y_r * w_r): dL/dx is every rank's w_r on its tokens (an all-gather).
  sum(mul(y, Variable(tokens(r * n, n, r + 1)))).backward();
  Tensor expected = zeros({kBatch, kSeq, kWidth}, kF64);
  for (int k = 0; k < T; ++k) expected.narrow(1, k * n, n).copy_(tokens(k * n, n, k + 1));
  EXPECT_EQ(max_abs_diff(x.grad(), expected), 0.0);
}

TEST(SequenceParallelRegion, GatherConcatenatesTokensAndReduceScattersGradients) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  const int64_t n = kSeq / T;
  Variable x(tokens(r * n, n, 0), true);
  const Variable y = gather_from_sequence_parallel_region(x, group);
  EXPECT_EQ(max_abs_diff(y.data(), tokens(0, kSeq, 0)), 0.0);
  // Rank k's loss weighs the whole sequence by w_k (a column-parallel layer's partial): dL/dx_r
  // is the sum over ranks of w_k, on rank r's tokens.
  sum(mul(y, Variable(tokens(0, kSeq, r + 1)))).backward();
  Tensor expected = zeros({kBatch, n, kWidth}, kF64);
  for (int k = 0; k < T; ++k) expected = add(expected, tokens(r * n, n, k + 1));
  EXPECT_EQ(max_abs_diff(x.grad(), expected), 0.0);
}

TEST(SequenceParallelRegion, ReduceScatterSumsAndKeepsThisRanksTokensAndGathersGradients) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  const int64_t n = kSeq / T;
  Variable x(tokens(0, kSeq, r), true);  // a partial sum: different on every rank
  const Variable y = reduce_scatter_to_sequence_parallel_region(x, group);
  Tensor expected = zeros({kBatch, n, kWidth}, kF64);
  for (int k = 0; k < T; ++k) expected = add(expected, tokens(r * n, n, k));
  EXPECT_EQ(max_abs_diff(y.data(), expected), 0.0);
  // dL/dy_r = w_r on rank r's tokens; every rank's x gets all of them (an all-gather).
  sum(mul(y, Variable(tokens(r * n, n, 7 + r)))).backward();
  Tensor grad = zeros({kBatch, kSeq, kWidth}, kF64);
  for (int k = 0; k < T; ++k) grad.narrow(1, k * n, n).copy_(tokens(k * n, n, 7 + k));
  EXPECT_EQ(max_abs_diff(x.grad(), grad), 0.0);
}

// Finite differences (f64) through each pair as a sequence-parallel layer uses it, between
// tensor parallelism's replicated ends: every rank perturbs the same elements in the same order,
// so the collectives inside match up.
TEST(SequenceParallelRegion, GradcheckThroughScatterAndGather) {
  auto group = dist::world();
  const Tensor w = mul(tokens(0, kSeq, group->rank() + 1), 1e-3);  // a column-parallel partial
  const GradcheckResult result = gradcheck(
      [&](const std::vector<Variable>& in) {
        // sum_r gather(scatter(x)) * w_r: LayerNorm's region, then a split layer.
        const Variable full = gather_from_sequence_parallel_region(
            scatter_to_sequence_parallel_region(in[0], group), group);
        return reduce_from_parallel_region(mul(full, Variable(w)), group);
      },
      {mul(tokens(0, kSeq, 0), 1e-2)});
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(SequenceParallelRegion, GradcheckThroughReduceScatter) {
  auto group = dist::world();
  const Tensor w = mul(tokens(0, kSeq, group->rank() + 1), 1e-3);
  const GradcheckResult result = gradcheck(
      [&](const std::vector<Variable>& in) {
        // A row-parallel layer's partial products x * w_r, reduce-scattered, then gathered
        // back (tensor parallelism's gather: the replicated result).
        const Variable mine =
            reduce_scatter_to_sequence_parallel_region(mul(copy_to_parallel_region(in[0], group),
                                                           Variable(w)),
                                                       group);
        return gather_from_parallel_region(mine, kSequenceDim, group);
      },
      {mul(tokens(0, kSeq, 0), 1e-2)});
  EXPECT_TRUE(result.ok) << result.message;
}

// An all-gather and a reduce-scatter of [B, S, C] send (T - 1) / T of it each per rank: together
// the 2 (T - 1) / T of the all-reduce they replace.
TEST(SequenceParallelRegion, GatherAndReduceScatterSendWhatTheAllReduceDid) {
  auto group = dist::world();
  const int T = group->size(), r = group->rank();
  const int64_t n = kSeq / T, full = kBatch * kSeq * kWidth * 4;
  int64_t before = group->ledger().total_bytes();
  Variable x(tokens(r * n, n, 0).to(kF32), true);
  const Variable y = gather_from_sequence_parallel_region(x, group);
  EXPECT_EQ(group->ledger().total_bytes() - before, (T - 1) * full / T);
  before = group->ledger().total_bytes();
  reduce_scatter_to_sequence_parallel_region(y, group);
  EXPECT_EQ(group->ledger().total_bytes() - before, (T - 1) * full / T);
}

TEST(SequenceParallelRegion, ASequenceThatDoesNotDivideByTIsAnError) {
  auto group = dist::world();
  const int T = group->size();
  const std::string t = std::to_string(T), s = std::to_string(T + 1);
  Variable x(zeros({kBatch, T + 1, kWidth}, kF64), true);
  // Every rank holds the same lengths, so every rank raises alike (none waits in a collective).
  expect_error([&] { scatter_to_sequence_parallel_region(x, group); },
               "scatter_to_sequence_parallel_region: a sequence of " + s +
                   " tokens does not divide by the tensor-parallel size T = " + t);
  expect_error([&] { reduce_scatter_to_sequence_parallel_region(x, group); },
               "reduce_scatter_to_sequence_parallel_region: a sequence of " + s +
                   " tokens does not divide by the tensor-parallel size T = " + t);
  expect_error([&] { gather_from_sequence_parallel_region(Variable(zeros({4}, kF64)), group); },
               "gather_from_sequence_parallel_region: expected activations [B, S, ...]");
  EXPECT_EQ(sequence_shard_length(12, 3, "x"), 4);
}

}  // namespace
}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
