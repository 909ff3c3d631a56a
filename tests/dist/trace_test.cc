// The trace recorder on 2 ranks (dist/trace_recorder.h, trace_file.h): steps selected as asked
// (and only the last one by default), collectives named by the label alive where they were
// issued and recorded on the communication thread's own track in the step they were issued in,
// DDP's bucket all-reduces per step as many as the parameter sizes and caps make (computed
// here), FSDP's gathers, frees and reduce-scatters per unit, and every rank's events on rank 0.
#include "dist/trace_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/environment.h"
#include "dist/trace_recorder.h"
#include "dist/zero/fully_sharded.h"
#include "models/simple.h"
#include "nn/nn.h"
#include "tensor/ops.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace dist {
namespace trace {
namespace {

// A fresh recorder state for each test: the recorder is the process's.
class Recording {
 public:
  explicit Recording(const TraceSteps& steps) {
    TraceRecorder::global().clear();
    TraceRecorder::global().enable(steps);
  }
  ~Recording() {
    TraceRecorder::global().disable();
    TraceRecorder::global().clear();
  }
};

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(7);
  return models::MLP(40, 32, 10);  // fc1: 32x40 + 32, fc2: 10x32 + 10
}

// `steps` steps of `forward_backward`, each marked on the recorder, numbered from 1.
template <typename F>
void run_steps(int steps, F forward_backward) {
  for (int s = 1; s <= steps; ++s) {
    TraceRecorder::global().begin_step(s);
    forward_backward(s);
    TraceRecorder::global().end_step();
  }
}

Variable loss_of(const Variable& out) {
  return cross_entropy(out, from_vector<int64_t>({0, 1, 2, 3, 4, 5}, {6}));
}

Tensor input(int step, int rank) {
  Generator g(100 * step + rank);
  return randn({6, 40}, kF32, &g);
}

// DDP's buckets by its rule, from the parameter sizes (registration order) alone: reverse
// order, a bucket closes once it holds at least its cap (the first one's cap is smaller).
std::vector<int64_t> buckets_of(const std::vector<int64_t>& numels, double first_mb, double cap_mb) {
  std::vector<int64_t> out;
  int64_t current = 0;
  for (size_t k = numels.size(); k-- > 0;) {
    current += numels[k];
    const double cap = out.empty() ? first_mb : cap_mb;
    if (current * 4.0 >= cap * 1024 * 1024) {
      out.push_back(current);
      current = 0;
    }
  }
  if (current > 0) out.push_back(current);
  return out;
}

std::vector<const Event*> of(const RankTrace& t, int64_t step, const std::string& category) {
  std::vector<const Event*> out;
  for (const Event& e : t.events) {
    if (e.step == step && e.category == category) out.push_back(&e);
  }
  return out;
}

TEST(TraceSteps, ParsesRangesOneStepAndLast) {
  const TraceSteps range = TraceSteps::parse("2:3");
  EXPECT_FALSE(range.last_only);
  EXPECT_EQ(range.first, 2);
  EXPECT_EQ(range.last, 3);
  EXPECT_FALSE(range.contains(1));
  EXPECT_TRUE(range.contains(3));
  EXPECT_FALSE(range.contains(4));
  const TraceSteps one = TraceSteps::parse("4");
  EXPECT_EQ(one.first, 4);
  EXPECT_EQ(one.last, 4);
  EXPECT_TRUE(TraceSteps::parse("last").last_only);
  for (const char* bad : {"0:2", "3:2", "x", "2:", ""}) {
    try {
      TraceSteps::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--trace-steps=") + bad), std::string::npos)
          << e.what();
    }
  }
}

TEST(TraceRecorder, RecordsOnlyInsideTheSelectedSteps) {
  Recording on(TraceSteps::parse("2:3"));
  auto& recorder = TraceRecorder::global();
  std::vector<bool> seen;
  run_steps(4, [&](int) {
    seen.push_back(recording());
    if (recording()) recorder.instant("mark", "test");
  });
  EXPECT_EQ(seen, (std::vector<bool>{false, true, true, false}));
  EXPECT_FALSE(recording());  // between steps
  std::map<int64_t, int> marks, steps;
  for (const Event& e : recorder.events()) {
    if (e.category == "test") ++marks[e.step];
    if (e.category == "step") ++steps[e.step];
  }
  EXPECT_EQ(marks, (std::map<int64_t, int>{{2, 1}, {3, 1}}));
  EXPECT_EQ(steps, (std::map<int64_t, int>{{2, 1}, {3, 1}}));
}

TEST(TraceRecorder, KeepsOnlyTheLastStepByDefault) {
  Recording on(TraceSteps{});
  run_steps(3, [&](int s) { TraceRecorder::global().instant("mark " + std::to_string(s), "test"); });
  const std::vector<Event> events = TraceRecorder::global().events();
  ASSERT_FALSE(events.empty());
  for (const Event& e : events) EXPECT_EQ(e.step, 3) << e.name;
}

TEST(TraceRecorder, NamesCollectivesOnTheCommunicationThreadsTrack) {
  auto world = dist::world();
  Recording on(TraceSteps::parse("1"));
  run_steps(1, [&](int) {
    Tensor t = ones({8});
    {
      CollectiveLabel outer("outer", "test_outer");
      {
        CollectiveLabel inner("all_reduce inner", "all_reduce", "\"elements\":8");
        world->all_reduce(t)->wait();
      }
      EXPECT_EQ(CollectiveLabel::current(), &outer);
      world->all_reduce(t)->wait();
    }
    EXPECT_EQ(CollectiveLabel::current(), nullptr);
    world->all_reduce(t)->wait();
  });
  std::vector<std::string> names;
  for (const Event& e : TraceRecorder::global().events()) {
    if (e.track == kComputeTrack) continue;
    names.push_back(e.name);
    EXPECT_EQ(e.step, 1);
    EXPECT_GT(e.end, e.start) << e.name;
    EXPECT_EQ(TraceRecorder::global().track_names()[e.track].rfind("comm thread ", 0), 0u);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"all_reduce inner", "outer", "collective"}));
}

TEST(TraceFile, DdpBucketsPerStepFromEveryRank) {
  auto world = dist::world();
  const double first_mb = 0.001, cap_mb = 0.004;  // 262 and 1048 f32 elements
  auto model = mlp();
  std::vector<int64_t> numels;
  for (const Variable& p : model->parameters()) numels.push_back(p.numel());
  const std::vector<int64_t> expected = buckets_of(numels, first_mb, cap_mb);
  ASSERT_GE(expected.size(), 2u);
  DistributedDataParallel ddp(model, world, DDPOptions().first_bucket_mb(first_mb).bucket_cap_mb(cap_mb));
  Recording on(TraceSteps::parse("2:3"));
  run_steps(3, [&](int s) { loss_of(ddp.forward(Variable(input(s, world->rank())))).backward(); });
  TraceRecorder::global().disable();
  const std::vector<RankTrace> ranks = gather_events(TraceRecorder::global(), *world);
  if (world->rank() != 0) return;
  ASSERT_EQ(static_cast<int>(ranks.size()), world->size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_TRUE(of(ranks[r], 1, "all_reduce").empty()) << "step 1 is not selected";
    for (int64_t step : {2, 3}) {
      const auto comm = of(ranks[r], step, "all_reduce");
      ASSERT_EQ(comm.size(), expected.size()) << "rank " << r << " step " << step;
      for (size_t b = 0; b < comm.size(); ++b) {
        EXPECT_EQ(comm[b]->name, "all_reduce bucket " + std::to_string(b));
        EXPECT_NE(comm[b]->args.find("\"elements\":" + std::to_string(expected[b])), std::string::npos)
            << comm[b]->args;
        EXPECT_NE(comm[b]->track, kComputeTrack);
      }
      EXPECT_EQ(of(ranks[r], step, "launch").size(), expected.size());
      const auto layers = of(ranks[r], step, "backward");
      ASSERT_EQ(layers.size(), 2u);
      EXPECT_EQ(layers[0]->name, "backward fc2");
      EXPECT_EQ(layers[1]->name, "backward fc1");
      EXPECT_EQ(of(ranks[r], step, "wait").size(), 1u);
    }
  }
  // The file: one process per rank, the comm thread's track named.
  const std::string json = chrome_trace_json(ranks);
  EXPECT_NE(json.find("\"args\":{\"name\":\"rank 1\"}"), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"all_reduce bucket 1\",\"cat\":\"all_reduce\",\"ph\":\"X\""),
            std::string::npos);
  const std::string path = tessera::testing::temp_path("ddp_trace.json");
  std::ofstream(path) << json;
  const auto parsed = tessera::testing::run_command("python3 -c 'import json,sys; json.load(open(sys.argv[1]))' " + path);
  EXPECT_EQ(parsed.exit_code, 0) << parsed.output;
}

TEST(TraceFile, FullyShardedUnitsGatheredFreedAndReduceScatteredPerStep) {
  auto world = dist::world();
  FullyShardedDataParallel fsdp(mlp(), world);  // units: fc1 and fc2
  const size_t units = fsdp.units().size();
  ASSERT_EQ(units, 2u);
  Recording on(TraceSteps::parse("1:2"));
  run_steps(2, [&](int s) { loss_of(fsdp(Variable(input(s, world->rank())))).backward(); });
  TraceRecorder::global().disable();
  const std::vector<RankTrace> ranks = gather_events(TraceRecorder::global(), *world);
  if (world->rank() != 0) return;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (int64_t step : {1, 2}) {
      // Gathered for its forward and again for its backward, freed after each.
      EXPECT_EQ(of(ranks[r], step, "all_gather").size(), 2 * units) << "rank " << r;
      EXPECT_EQ(of(ranks[r], step, "free").size(), 2 * units) << "rank " << r;
      EXPECT_EQ(of(ranks[r], step, "reduce_scatter").size(), units) << "rank " << r;
      // fc1: 32x40 + 32 = 1312 elements, padded to a multiple of the ranks.
      const int64_t n = world->size(), fc1 = (1312 + n - 1) / n * n;
      EXPECT_NE(of(ranks[r], step, "all_gather")[0]->args.find("\"elements\":" + std::to_string(fc1)),
                std::string::npos);
    }
  }
}

}  // namespace
}  // namespace trace
}  // namespace dist
}  // namespace tessera
