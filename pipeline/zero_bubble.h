// Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): ZB-H1 and
// ZB-H2 as pure functions (K stages, M micro-batches, stage s) -> stage s's actions.
//
// The idea: a stage's backward computes two things. B i, the gradient with respect to the
// stage's input, is what stage s-1 waits for; W i, the gradient with respect to the stage's
// weights, is needed by nobody until the optimizer step. 1F1B runs both at once, so the W half
// sits on the critical path of every gradient that travels back. Split, B goes first and W
// fills a slot where the stage would otherwise idle. An activation is held from F i until W i
// (W needs the layer inputs too); B i done and W i not yet is "pending W" work. ZB-H1 and ZB-H2
// are the paper's handcrafted schedules (its ZB-1p and ZB-2p are searched for under the same
// memory limits).
//
// K = 4, M = 8, F, B and W one cell each (the backward twice the forward, split evenly).
//
// 1F1B: its backward is B and W at once (drawn B W): the gradient leaves after both, so every
// hop of the first backward back to stage 0 costs T_B + T_W. 33 slots, 9 idle per stage:
// (K-1)(T_F + T_B + T_W), the bubble (K-1)/(M+K-1) of schedule.h.
//
//   slot      0   1   2   3   4   5   6   7   8   9   10  11  12  13  14  15  16  17  18  19  20  21  22  23  24  25  26  27  28  29  30  31  32
//   stage 0   F0  F1  F2  F3  .   .   .   .   .   .   B0  W0  F4  B1  W1  F5  B2  W2  F6  B3  W3  F7  B4  W4  .   B5  W5  .   B6  W6  .   B7  W7
//   stage 1   .   F0  F1  F2  .   .   .   .   B0  W0  F3  B1  W1  F4  B2  W2  F5  B3  W3  F6  B4  W4  F7  B5  W5  .   B6  W6  .   B7  W7  .   .
//   stage 2   .   .   F0  F1  .   .   B0  W0  F2  B1  W1  F3  B2  W2  F4  B3  W3  F5  B4  W4  F6  B5  W5  F7  B6  W6  .   B7  W7  .   .   .   .
//   stage 3   .   .   .   F0  B0  W0  F1  B1  W1  F2  B2  W2  F3  B3  W3  F4  B4  W4  F5  B5  W5  F6  B6  W6  F7  B7  W7  .   .   .   .   .   .
//
// ZB-H1: 1F1B's list with W passes inserted. Stage s runs 1F1B's forwards
// and backwards in 1F1B's order (K-1-s warm-up forwards), puts W j-s right after B j (after
// its gradient send) and closes with the s+1 W passes still pending. 27 slots, 3 idle per stage:
// (K-1)(T_F + T_B - T_W), a third of 1F1B's at T_F = T_B = T_W.
//
//   slot      0   1   2   3   4   5   6   7   8   9   10  11  12  13  14  15  16  17  18  19  20  21  22  23  24  25  26
//   stage 0   F0  F1  F2  F3  .   .   .   B0  W0  F4  B1  W1  F5  B2  W2  F6  B3  W3  F7  B4  W4  B5  W5  B6  W6  B7  W7
//   stage 1   .   F0  F1  F2  .   .   B0  F3  B1  W0  F4  B2  W1  F5  B3  W2  F6  B4  W3  F7  B5  W4  B6  W5  B7  W6  W7
//   stage 2   .   .   F0  F1  .   B0  F2  B1  F3  B2  W0  F4  B3  W1  F5  B4  W2  F6  B5  W3  F7  B6  W4  B7  W5  W6  W7
//   stage 3   .   .   .   F0  B0  F1  B1  F2  B2  F3  B3  W0  F4  B4  W1  F5  B5  W2  F6  B6  W3  F7  B7  W4  W5  W6  W7
//
// Where the 3 idle slots are: stage s waits s slots for its first forward and K-1-s for its
// first B (1F1B's warm-up gap, which no W can fill since no B has run yet); after that a W
// fills every wait, because B j no longer waits for the W half of B j on the stage after it.
//
// ZB-H2: stage s's first B cannot start before slot 2K-1-s (F0 reaches the last stage
// at slot K-1 and its B comes back one stage per slot). Stage s starts at slot s, so there are
// 2(K-1-s)+1 slots to fill first, and only forwards exist yet: ZB-H2 warms up with
// 2(K-1-s)+1 forwards (they arrive in time: stage s-1 is two forwards ahead). Then 1F1B's
// pattern with W j-2s right after B j, and the 2s+1 W passes left close the list: each stage
// computes without a gap from slot s to slot s+3M, a parallelogram. 27 slots.
//
//   slot      0   1   2   3   4   5   6   7   8   9   10  11  12  13  14  15  16  17  18  19  20  21  22  23  24  25  26
//   stage 0   F0  F1  F2  F3  F4  F5  F6  B0  W0  F7  B1  W1  B2  W2  B3  W3  B4  W4  B5  W5  B6  W6  B7  W7  .   .   .
//   stage 1   .   F0  F1  F2  F3  F4  B0  F5  B1  F6  B2  W0  F7  B3  W1  B4  W2  B5  W3  B6  W4  B7  W5  W6  W7  .   .
//   stage 2   .   .   F0  F1  F2  B0  F3  B1  F4  B2  F5  B3  F6  B4  W0  F7  B5  W1  B6  W2  B7  W3  W4  W5  W6  W7  .
//   stage 3   .   .   .   F0  B0  F1  B1  F2  B2  F3  B3  F4  B4  F5  B5  F6  B6  W0  F7  B7  W1  W2  W3  W4  W5  W6  W7
//
// With a flush (the optimizer step waits for every stage) a batch still takes (K-1) T_F more
// than its work: the last stage cannot start earlier. That is the least any schedule can do,
// and ZB-H1 already reaches it at T_F = T_B = T_W, so there the two differ only when batches
// run back to back without the flush (the paper's optimizer post-validation): each stage then
// starts its next batch when it ends this one, ZB-H2's parallelograms tile with no bubble at
// all, and ZB-H1's stage 0 still idles in the middle of its batch. With W shorter than B, ZB-H2
// is ahead with a flush too (timing_model.h has the formulas).
//
// Memory. An activation is held from F i to W i. ZB-H1 holds min(K, M) on every stage, 1F1B's
// peak (its stage 0's), though its later stages hold more than in 1F1B (K-s there), and they
// must: with stage 0 holding K, stage 0 idles K-1 slots before its first B, so it may not idle
// again; its last B ends one slot before the end, the last stage's last B K-1 slots earlier,
// and the last stage (which starts K-1 slots late and may not idle either) spends its last K
// slots on K pending W passes. Pending W (B done, W not yet) peaks at min(s+1, M) on stage s.
// ZB-H2 holds min(2K-1, M) on every stage, about twice 1F1B's, with up to 2s+1 pending W.
//
// Any K >= 1, M >= 1. With M < K (both), a stage cannot warm up with more forwards than there
// are, and the bubble grows from K-1 to 2K-1-M slots. ZB-H2 needs M >= 2K-1
// for its parallelogram; below that its W lag shrinks by 2K-1-M (never below 0), so the W
// passes start as soon as the forwards run out (what a greedy that runs B when its gradient is
// there, else F, else W, does): its bubble with a flush is then ZB-H1's, and without a flush it
// falls from ZB-H1's at M = K to 0 at M = 2K-1.
//
// Messages are those of 1F1B: RA before F and SA after it (not on the first / last stage), RG
// before B and SG after it (not on the last / first stage); W has none. ZB-H1 keeps 1F1B's
// message order ("F i RG j SA i B j"), so it is sound under blocking sends as 1F1B is, but it
// reaches its bubble only under buffered ones (validator.h: transport_for). ZB-H2's stage s
// sends activation i while stage s+1 is still two backwards away from needing it; a blocking
// send would wait there while stage s+1 waits for stage s to take its next gradient: a
// deadlock (tests/pipeline/validator_test.cc). So
// ZB-H2 receives right before each computation and sends right after it, the order of
// eager_sends(), sound under buffered sends (the executor's).
#pragma once

#include <vector>

#include "pipeline/schedule.h"

namespace tessera {
namespace pipeline {

// K >= 1, M >= 1, 0 <= stage < K. ZB-H1 is sound under blocking and buffered sends, ZB-H2
// under buffered sends only (see above); validate() them with transport_for(kind).
std::vector<Action> zb_h1(int stages, int microbatches, int stage);
std::vector<Action> zb_h2(int stages, int microbatches, int stage);

}  // namespace pipeline
}  // namespace tessera
