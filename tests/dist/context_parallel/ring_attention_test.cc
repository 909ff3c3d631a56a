// Ring attention (dist/context_parallel/ring_attention.h) over the world's C ranks against one
// process's causal attention on the whole sequence (autograd/functions.h's causal_attention,
// itself checked against the plain reference): each rank's rows of the output and of the
// q, k, v gradients, in f32 within 1e-5 and f64 within 1e-12, with the head-tail and the
// contiguous split, chunks of odd length and kernel blocks that do not divide them; GPT-2's
// packed form (ring_self_attention) likewise; which blocks the mask lets a rank skip; the
// length error; gather_sequence. Runs on 2 and 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/functions.h"
#include "dist/context_parallel/gather_sequence.h"
#include "dist/context_parallel/ring_attention.h"
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



struct Case {
  DType dtype;
  SequenceSplit split;
  AttentionBlocks blocks;
};

std::string name(const Case& c) {
  return std::string(c.dtype == kF32 ? "f32 " : "f64 ") + split_name(c.split) + " blocks " +
         std::to_string(c.blocks.query) + "x" + std::to_string(c.blocks.key);
}

TEST(RingAttention, EqualsOneProcessCausalAttention) {
  const auto group = world();
  const int c = group->size(), rank = group->rank();
  for (const Case& cs :
       {Case{kF32, SequenceSplit::kHeadTail, {}}, Case{kF32, SequenceSplit::kContiguous, {}},
        Case{kF32, SequenceSplit::kHeadTail, {3, 4}}, Case{kF64, SequenceSplit::kHeadTail, {2, 3}},
        Case{kF64, SequenceSplit::kContiguous, {4, 2}}}) {
    const double tol = cs.dtype == kF32 ? 1e-5 : 1e-12;
    const int64_t chunk = 5, t = 2 * c * chunk;  // odd chunks: T = 20 on 2 ranks, 40 on 4
    const Shape shape{2, 3, t, 4};
    const Tensor q = seeded_normal(shape, cs.dtype, 1), k = seeded_normal(shape, cs.dtype, 2),
                 v = seeded_normal(shape, cs.dtype, 3), g = seeded_normal(shape, cs.dtype, 4);
    // One process: the whole sequence.
    Variable qa(q, true), ka(k, true), va(v, true);
    const Variable whole = causal_attention(qa, ka, va, 0.5);
    sum(mul(whole, Variable(g))).backward();
    // This rank's rows, around the ring.
    auto mine = [&](const Tensor& x) { return rank_rows(x, 2, rank, c, cs.split); };
    Variable qr(mine(q), true), kr(mine(k), true), vr(mine(v), true);
    RingAttentionStats stats;
    const Variable out =
        ring_attention(qr, kr, vr, 0.5, group,
                       RingAttentionOptions().split(cs.split).blocks(cs.blocks).stats(&stats));
    EXPECT_EQ(out.dtype(), cs.dtype);
    expect_near_on_rank(out.data(), mine(whole.data()), tol, "output, " + name(cs));
    sum(mul(out, Variable(mine(g)))).backward();
    expect_near_on_rank(qr.grad(), mine(qa.grad()), tol, "grad q, " + name(cs));
    expect_near_on_rank(kr.grad(), mine(ka.grad()), tol, "grad k, " + name(cs));
    expect_near_on_rank(vr.grad(), mine(va.grad()), tol, "grad v, " + name(cs));
    // Head-tail: every rank's head chunk comes before every rank's tail chunk, so no block is
    // hidden whole. Contiguous: the blocks of the ranks after this one are.
    const int64_t hidden = cs.split == SequenceSplit::kHeadTail ? 0 : c - 1 - rank;
    EXPECT_EQ(stats.blocks_skipped, hidden) << name(cs);
    EXPECT_EQ(stats.blocks_computed, c - hidden) << name(cs);
    EXPECT_GT(stats.backward_compute_seconds, 0.0);
  }
}

TEST(RingSelfAttention, EqualsOneProcessCausalSelfAttention) {
  const auto group = world();
  const int c = group->size(), rank = group->rank();
  const int64_t n_head = 2, width = 2 * 3, t = 2 * c * 3;
  const Tensor qkv = seeded_normal({2, t, 3 * width}, kF64, 7), g = seeded_normal({2, t, width}, kF64, 8);
  Variable whole_in(qkv, true);
  const Variable whole = causal_self_attention(whole_in, n_head);
  sum(mul(whole, Variable(g))).backward();
  auto mine = [&](const Tensor& x) { return rank_rows(x, 1, rank, c, SequenceSplit::kHeadTail); };
  Variable in(mine(qkv), true);
  const Variable out = ring_self_attention(in, n_head, group);
  expect_near_on_rank(out.data(), mine(whole.data()), 1e-12, "output");
  sum(mul(out, Variable(mine(g)))).backward();
  expect_near_on_rank(in.grad(), mine(whole_in.grad()), 1e-12, "grad qkv");
}

// gather_sequence puts every rank's chunks back in position order: the inverse of rank_rows.
TEST(GatherSequence, InvertsRankRows) {
  const auto group = world();
  const int c = group->size();
  const Tensor x = seeded_normal({2, 4 * c, 3}, kF32, 9);
  for (const SequenceSplit split : {SequenceSplit::kHeadTail, SequenceSplit::kContiguous}) {
    const Tensor back = gather_sequence(rank_rows(x, 1, group->rank(), c, split), 1, *group, split);
    EXPECT_EQ(max_abs_diff(back, x), 0.0) << split_name(split);
  }
}

TEST(RingAttention, TheSequenceMustDivideInto2CChunks) {
  const auto group = world();
  const int c = group->size();
  // 3 rows per rank: T = 3C does not divide by 2C.
  const Variable x(seeded_normal({1, 1, 3, 2}, kF32, 1));
  expect_error([&] { ring_attention(x, x, x, 1.0, group); },
               "ring_attention: context parallelism over " + std::to_string(c) +
                   " ranks cuts the sequence into 2 x " + std::to_string(c) + " = " +
                   std::to_string(2 * c) + " equal chunks, and a sequence of " +
                   std::to_string(3 * c) + " tokens does not divide by " + std::to_string(2 * c));
}

}  // namespace
}  // namespace context_parallel
}  // namespace dist
}  // namespace tessera
