// DeepSpeed-Ulysses (dist/context_parallel/ulysses_attention.h) over the world's C ranks against
// one process's causal attention on the whole sequence: each rank's rows of the output and of
// the q, k, v gradients, f32 within 1e-5 and f64 within 1e-12, with the head-tail and the
// contiguous split; the error when C does not divide the heads. Runs on 2 and 4 ranks.
#include <gtest/gtest.h>

#include <string>

#include "autograd/functions.h"
#include "dist/context_parallel/ulysses_attention.h"
#include "dist/environment.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"
#include "tests/util/tensor_near.h"

namespace tessera {
namespace dist {
namespace context_parallel {
namespace {

using testing::expect_error;
using testing::seeded_normal;

// expect_near, naming this rank.
void expect_near_on_rank(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  testing::expect_near(a, b, tol, what + " on rank " + std::to_string(world()->rank()));
}



TEST(UlyssesAttention, EqualsOneProcessCausalAttention) {
  const auto group = world();
  const int c = group->size(), rank = group->rank();
  for (const DType dtype : {kF32, kF64}) {
    for (const SequenceSplit split : {SequenceSplit::kHeadTail, SequenceSplit::kContiguous}) {
      const std::string what = std::string(dtype == kF32 ? "f32 " : "f64 ") + split_name(split);
      const double tol = dtype == kF32 ? 1e-5 : 1e-12;
      const Shape shape{2, 4, 2 * c * 5, 3};  // 4 heads; odd chunks of 5
      const Tensor q = seeded_normal(shape, dtype, 1), k = seeded_normal(shape, dtype, 2),
                   v = seeded_normal(shape, dtype, 3), g = seeded_normal(shape, dtype, 4);
      Variable qa(q, true), ka(k, true), va(v, true);
      const Variable whole = causal_attention(qa, ka, va, 0.5);
      sum(mul(whole, Variable(g))).backward();
      auto mine = [&](const Tensor& x) { return rank_rows(x, 2, rank, c, split); };
      Variable qr(mine(q), true), kr(mine(k), true), vr(mine(v), true);
      const Variable out = ulysses_attention(qr, kr, vr, 0.5, group, split);
      expect_near_on_rank(out.data(), mine(whole.data()), tol, "output, " + what);
      sum(mul(out, Variable(mine(g)))).backward();
      expect_near_on_rank(qr.grad(), mine(qa.grad()), tol, "grad q, " + what);
      expect_near_on_rank(kr.grad(), mine(ka.grad()), tol, "grad k, " + what);
      expect_near_on_rank(vr.grad(), mine(va.grad()), tol, "grad v, " + what);
    }
  }
}

TEST(UlyssesAttention, TheRanksMustDivideTheHeads) {
  const auto group = world();
  const int c = group->size();
  const Variable x(seeded_normal({1, 2 * c + 1, 2 * c, 2}, kF32, 5));
  expect_error([&] { ulysses_attention(x, x, x, 1.0, group); },
               "splits the " + std::to_string(2 * c + 1) + " heads over the " +
                   std::to_string(c) + " context-parallel ranks, and " + std::to_string(c) +
                   " does not divide " + std::to_string(2 * c + 1));
}

}  // namespace
}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
