// Bytes per step per strategy and collective for a tiny model, by hand, and DDP's buckets.
#include "cost/traffic.h"

#include <gtest/gtest.h>

#include "cost/buckets.h"

namespace tessera {
namespace cost {
namespace {

// conv-like layer (100 + 10 parameters), a parameterless one, a head (40): psi = 150.
ModelProfile tiny_model() {
  ModelProfile m;
  m.name = "tiny";
  m.batch = 4;
  m.layers = {{"a", {100, 10}, 50}, {"relu", {}, 50}, {"head", {40}, 4}};
  m.tensor_parallel_all_reduces = {{"x", 5}};
  return m;
}

const Transfer& find(const std::vector<Transfer>& t, const std::string& strategy,
                     const std::string& collective) {
  for (const Transfer& x : t) {
    if (x.strategy == strategy && x.collective == collective) return x;
  }
  throw std::runtime_error("no " + strategy + " " + collective);
}

TEST(Buckets, ReverseOrderFirstBucketSmaller) {
  // Caps 1048.576 bytes (first) and 2097.152: [p4 p3] = 2100 closes the first, [p2 p1 p0] the second.
  const auto b = assign_buckets({1000, 500, 600, 2000, 100}, 1e-3, 2e-3);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].parameters, (std::vector<size_t>{4, 3}));
  EXPECT_EQ(b[0].bytes, 2100);
  EXPECT_EQ(b[1].parameters, (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(b[1].bytes, 2100);
}

TEST(Traffic, TinyModelOnFourRanks) {
  TrafficOptions o;
  o.ranks = 4;
  o.stages = 2;
  o.microbatches = 2;
  o.tensor_parallel = 2;
  const auto t = traffic_per_step(tiny_model(), TrainingSetup{Precision::kF32, OptimizerKind::kSGD}, o);
  // DDP: 2 (N-1)/N x 4 psi = 2 x 3/4 x 600 = 900 bytes, one bucket.
  EXPECT_EQ(find(t, "ddp", "all_reduce").bytes, 900);
  EXPECT_EQ(find(t, "ddp", "all_reduce").calls, 1);
  EXPECT_EQ(find(t, "zero1", "reduce_scatter").bytes, 450);
  EXPECT_EQ(find(t, "zero2", "all_gather").bytes, 450);
  // ZeRO-3: units padded to 112 and 40 elements, P = 152: gathers 2 x 3/4 x 608, scatter 3/4 x 608.
  EXPECT_EQ(find(t, "zero3", "all_gather").bytes, 912);
  EXPECT_EQ(find(t, "zero3", "all_gather").calls, 4);
  EXPECT_EQ(find(t, "zero3", "reduce_scatter").bytes, 456);
  // Pipeline: balanced by parameters [a relu | head]; the cut sends 50 x 2 examples x 4 bytes
  // plus a 96-byte header, per micro-batch, each way: 2 x (400 + 96).
  EXPECT_EQ(pipeline_cuts(tiny_model(), 2), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(find(t, "pipeline", "send").bytes, 992);
  EXPECT_EQ(find(t, "pipeline", "send").calls, 4);
  // Tensor parallel: 2 (T-1)/T x batch 4 x 5 elements x 4 bytes.
  EXPECT_EQ(find(t, "tensor_parallel", "all_reduce").bytes, 80);
}

TEST(Traffic, OneRankSendsNothing) {
  TrafficOptions o;
  o.ranks = 1;
  for (const Transfer& x : traffic_per_step(tiny_model(), TrainingSetup{}, o)) {
    if (x.strategy == "pipeline" || x.strategy == "tensor_parallel") continue;
    EXPECT_EQ(x.bytes, 0) << x.strategy << " " << x.collective;
    EXPECT_EQ(x.calls, 0) << x.strategy << " " << x.collective;
  }
}

}  // namespace
}  // namespace cost
}  // namespace tessera
