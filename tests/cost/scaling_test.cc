// The overlap and scaling models against timelines played by hand.
#include "cost/scaling.h"

#include <gtest/gtest.h>

#include "cost/overlap.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

TEST(OverlapTimeline, HidesWhatFitsUnderCompute) {
  OverlapTimeline t;
  t.compute(1);
  const int a = t.launch(2);  // 1..3
  t.compute(4);               // 1..5: hides it
  const int b = t.launch(3);  // 5..8
  t.wait(a);
  EXPECT_EQ(t.now(), 5);
  t.wait_all();
  EXPECT_EQ(t.now(), 8);
  EXPECT_EQ(t.end(b), 8);
  EXPECT_EQ(t.compute_seconds(), 5);
  EXPECT_EQ(t.communication_seconds(), 5);
  EXPECT_EQ(t.exposed_seconds(), 3);
}

// Two layers with one parameter each; ring on 2 ranks at alpha = 0 and 1 MB/s, so an
// all-reduce of n bytes takes n / 1e6 seconds.
ModelProfile two_layers() {
  ModelProfile m;
  m.name = "two";
  m.batch = 8;
  m.layers = {{"l0", {1000000}, 10, 0.5, 2}, {"l1", {2000000}, 10, 0.5, 3}};
  return m;
}

ScalingOptions slow_ring(Strategy s) {
  ScalingOptions o;
  o.strategy = s;
  o.network.inter = Link{0, 1e6};
  o.network.algorithm = Algorithm::kRing;
  return o;
}

TEST(Scaling, DdpOverlapsTwoBuckets) {
  // Buckets: [l1] 8 MB (past the 1 MB first cap), [l0] 4 MB. Forward 0..1; backward of l1
  // 1..4, its bucket all-reduced 4..12; backward of l0 4..6, its bucket waits for the link:
  // 12..16. Step 16 s, of which 6 compute.
  const ScalingPoint p = predict_step(two_layers(), 2, slow_ring(Strategy::kDDP));
  EXPECT_DOUBLE_EQ(p.step, 16);
  EXPECT_DOUBLE_EQ(p.compute, 6);
  EXPECT_DOUBLE_EQ(p.communication, 12);
  EXPECT_DOUBLE_EQ(p.exposed, 10);
  EXPECT_EQ(p.collectives, 2);
  EXPECT_EQ(p.algorithm, "ring");
  EXPECT_DOUBLE_EQ(p.images_per_second, 2 * 8 / 16.0);
  EXPECT_DOUBLE_EQ(p.efficiency, 6.0 / 16);
  const ScalingPoint one = predict_step(two_layers(), 1, slow_ring(Strategy::kDDP));
  EXPECT_DOUBLE_EQ(one.step, 6);
  EXPECT_DOUBLE_EQ(one.efficiency, 1);
}

TEST(Scaling, DdpWithCompressionSendsTheCompressorsMessages) {
  // fp16 halves each f32 bucket's all-reduce: [l1] 4 MB at 4..8 (its backward ends at 4), [l0]
  // 2 MB waits for the link: 8..10. Step 10 s.
  ScalingOptions fp16 = slow_ring(Strategy::kDDP);
  fp16.compression = "fp16";
  const ScalingPoint half = predict_step(two_layers(), 2, fp16);
  EXPECT_DOUBLE_EQ(half.step, 10);
  EXPECT_DOUBLE_EQ(half.communication, 6);
  EXPECT_EQ(half.collectives, 2);
  // sign: one all-gather per bucket of N messages of 4 + n/8 bytes, (N-1)/N of the output on the
  // ring: [l1] 250,004 bytes at 4..4.250004, [l0] 125,004 bytes after l0's backward, 6..6.125004.
  ScalingOptions sign = slow_ring(Strategy::kDDP);
  sign.compression = "sign";
  const ScalingPoint s = predict_step(two_layers(), 2, sign);
  EXPECT_NEAR(s.step, 6.125004, 1e-9);
  EXPECT_NEAR(s.communication, 0.375008, 1e-9);
  // An all-gather grows with N: at 4 ranks each bucket's all-gather sends (N-1) messages.
  const ScalingPoint s4 = predict_step(two_layers(), 4, sign);
  EXPECT_NEAR(s4.communication, 3 * 0.375008, 1e-9);
  bool said = false;
  for (const std::string& a : scaling_assumptions(two_layers(), sign)) said = said || a.find("gradient compression sign") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Scaling, OverheadSharedCoresAndStepAllReducesAddUp) {
  // The DDP step above (16 s: compute 6, all-reduces 4..12 and 12..16), plus:
  //   a step overhead of 1 s, not overlapped: 17 s, compute 7;
  //   one 8-byte all-reduce a step: 2 (N-1)/N x 8 B / 1 MB/s = 8 us more;
  //   4 ranks on 2 cores: every computation twice as long. Forward 0..2; backward of l1 2..8,
  //   its 8 MB bucket all-reduced (ring over 4: 2 x 3/4 x 8 MB = 12 s) 8..20; backward of l0
  //   8..12, its 4 MB bucket (6 s) 20..26; then the overhead, 2 s: 28 s, compute 14.
  ModelProfile m = two_layers();
  m.step_overhead_seconds = 1;
  ScalingOptions o = slow_ring(Strategy::kDDP);
  ScalingPoint p = predict_step(m, 2, o);
  EXPECT_DOUBLE_EQ(p.step, 17);
  EXPECT_DOUBLE_EQ(p.compute, 7);
  o.step_all_reduces = 1;
  p = predict_step(m, 2, o);
  EXPECT_NEAR(p.step, 17 + 8e-6, 1e-12);
  EXPECT_EQ(p.collectives, 3);
  o.step_all_reduces = 0;
  o.cores = 2;
  EXPECT_DOUBLE_EQ(predict_step(m, 2, o).step, 17);  // 2 ranks, 2 cores: no sharing
  p = predict_step(m, 4, o);
  EXPECT_DOUBLE_EQ(p.step, 28);
  EXPECT_DOUBLE_EQ(p.compute, 14);
  // Efficiency against one uncontended rank: 4 x 8 / 28 images/s over 4 x 8 / 7.
  EXPECT_DOUBLE_EQ(p.efficiency, 7.0 / 28);
  const auto a = scaling_assumptions(m, o);
  bool overhead = false, cores = false;
  for (const std::string& s : a) {
    overhead = overhead || s.find("step overhead 1000.000 ms") != std::string::npos;
    cores = cores || s.find("the ranks share 2 cores") != std::string::npos;
  }
  EXPECT_TRUE(overhead && cores);
}

TEST(Scaling, ZeRO3GathersAndScatters) {
  // Units of 1000 and 2000 elements, f32, 2 ranks at 1 kB/s: gathers and scatters take 2 and 4 s.
  ModelProfile m;
  m.name = "z";
  m.batch = 1;
  m.layers = {{"u0", {1000}, 1, 1, 2}, {"u1", {2000}, 1, 1, 2}};
  ScalingOptions o = slow_ring(Strategy::kZeRO3);
  o.network.inter = Link{0, 1e3};
  // comm: AG0 0..2, AG1 2..6 | AG1 7..11, AG0 11..13, RS1 13..17, RS0 17..19
  // compute: wait 2, F0 2..3, wait 6, F1 6..7 | wait 11, B1 11..13 | B0 13..15 | wait 19
  const ScalingPoint p = predict_step(m, 2, o);
  EXPECT_DOUBLE_EQ(p.step, 19);
  EXPECT_DOUBLE_EQ(p.communication, 18);
  EXPECT_EQ(p.collectives, 6);
}

TEST(Scaling, PipelineBubble) {
  // Two layers, each forward 1 and backward 2 per batch; K = 2, M = 2, free messages: 1F1B
  // takes (M + K - 1)(F + B) per micro-batch = 3 x 1.5; efficiency M / (M + K - 1).
  ModelProfile m;
  m.name = "p";
  m.batch = 2;
  m.layers = {{"a", {10}, 4, 1, 2}, {"b", {10}, 4, 1, 2}};
  ScalingOptions o = slow_ring(Strategy::kPipeline);
  o.network.inter = Link{0, 1e30};
  o.stages = 2;
  o.microbatches = 2;
  const ScalingPoint p = predict_step(m, 2, o);
  EXPECT_DOUBLE_EQ(p.step, 4.5);
  EXPECT_EQ(p.replicas, 1);
  EXPECT_NEAR(p.efficiency, 2.0 / 3, 1e-12);
  testing::expect_error([&] { predict_step(m, 3, o); }, "3 ranks are not a multiple of 2 stages");
}

TEST(Scaling, PipelineSchedulesPriced) {
  // Four layers, each forward 1 and backward 2 per batch; K = 2 stages, M = 4 micro-batches,
  // free messages. Per micro-batch a stage's F = 2 x 1/4 = 0.5 and its backward 1.
  ModelProfile m;
  m.name = "p4";
  m.batch = 4;
  m.layers = {{"a", {10}, 4, 1, 2}, {"b", {10}, 4, 1, 2}, {"c", {10}, 4, 1, 2}, {"d", {10}, 4, 1, 2}};
  ScalingOptions o = slow_ring(Strategy::kPipeline);
  o.network.inter = Link{0, 1e30};
  o.stages = 2;
  o.microbatches = 4;
  auto step = [&](pipeline::ScheduleKind kind, int chunks, double weight_fraction) {
    ScalingOptions s = o;
    s.schedule = kind;
    s.chunks = chunks;
    s.weight_fraction = weight_fraction;
    return predict_step(m, 2, s).step;
  };
  // GPipe and 1F1B: (M + K - 1)(F + B) = 5 x 1.5.
  EXPECT_DOUBLE_EQ(step(pipeline::ScheduleKind::kGPipe, 1, 0.5), 7.5);
  EXPECT_DOUBLE_EQ(step(pipeline::ScheduleKind::kOneFOneB, 1, 0.5), 7.5);
  // Interleaved, v = 2: four virtual stages of one layer (F 0.25, backward 0.5); the bubble
  // shrinks to (K-1)/(vM + K-1) = 1/9 of the step: M (F + B) / (1 - 1/9) = 6 x 9/8.
  EXPECT_NEAR(step(pipeline::ScheduleKind::kInterleaved, 2, 0.5), 6.75, 1e-12);
  // ZB-H1: T_F = 0.5 and the backward split into T_B and T_W; bubble
  // (K-1) max(T_F, T_B, T_F + T_B - T_W) on top of M (T_F + T_B + T_W) = 6.
  EXPECT_NEAR(step(pipeline::ScheduleKind::kZBH1, 1, 0.5), 6 + 0.5, 1e-12);  // T_B = T_W = 0.5
  EXPECT_NEAR(step(pipeline::ScheduleKind::kZBH1, 1, 1.0 / 3), 6 + 0.5 + 2.0 / 3 - 1.0 / 3, 1e-12);
  // ZB-H2 at F = B = W: (K-1) T_F.
  EXPECT_NEAR(step(pipeline::ScheduleKind::kZBH2, 1, 0.5), 6 + 0.5, 1e-12);
  // Every schedule does the same work: the busiest rank computes M (F + B) = 6.
  ScalingOptions zb = o;
  zb.schedule = pipeline::ScheduleKind::kZBH1;
  EXPECT_DOUBLE_EQ(predict_step(m, 2, zb).compute, 6);
  testing::expect_error([&] { step(pipeline::ScheduleKind::kOneFOneB, 2, 0.5); },
                        "2 chunks per rank need the interleaved schedule, not 1f1b");
  testing::expect_error([&] { step(pipeline::ScheduleKind::kInterleaved, 4, 0.5); },
                        "2 stages x 4 chunks = 8 parts of p4's 4 layers");
  const auto a = scaling_assumptions(m, zb);
  bool split = false;
  for (const std::string& s : a) split = split || s.find("B (input gradient, 50%") != std::string::npos;
  EXPECT_TRUE(split);
}

TEST(Scaling, PickerAvoidsTheRingsCollapseAtScale) {
  // 100 small buckets' worth of latency: at 4096 ranks and 5 us a ring all-reduce pays 41 ms
  // each; the tree 120 us.
  ModelProfile m = two_layers();
  ScalingOptions ring = slow_ring(Strategy::kDDP);
  ring.network.inter = Link::from(5, 100);
  ScalingOptions picked = ring;
  picked.network.algorithm = Algorithm::kAuto;
  const ScalingPoint r = predict_step(m, 4096, ring), a = predict_step(m, 4096, picked);
  EXPECT_LT(a.step, r.step);
  EXPECT_EQ(a.algorithm, "tree");
}

TEST(Scaling, AssumptionsAreStated) {
  const auto a = scaling_assumptions(two_layers(), slow_ring(Strategy::kDDP));
  ASSERT_GE(a.size(), 5u);
  EXPECT_NE(a[0].find("weak scaling"), std::string::npos);
  testing::expect_error([] { parse_strategy("fsdp"); }, "unknown strategy 'fsdp'");
  ModelProfile untimed = two_layers();
  for (auto& l : untimed.layers) l.forward_seconds = l.backward_seconds = 0;
  testing::expect_error([&] { predict_step(untimed, 2, slow_ring(Strategy::kDDP)); }, "no compute times");
}

}  // namespace
}  // namespace cost
}  // namespace tessera
