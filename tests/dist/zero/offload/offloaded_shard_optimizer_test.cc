// zero::GroupedShardOptimizer with its state offloaded (disk and host tiers), in one process:
// two units' shards cut by two parameter groups (AdamW of different decay and learning rate)
// and by pieces of 1024 elements, stepped five times, equal the in-memory optimizer's shards and
// state bit for bit; its state dict loads into an in-memory optimizer and back, continuing
// bit-equal; the resident bytes (the counting allocator) lie below the in-memory run's by the
// state's size; SGD with momentum (state made on the first step from the gradient) too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "dist/zero/grouped_shard_optimizer.h"
#include "dist/zero/offload/optimizer_swapper.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/util/expect_error.h"

namespace tessera {
namespace dist {
namespace zero {
namespace {

namespace fs = std::filesystem;

std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / ("offloaded_shard_" + name);
  fs::remove_all(dir);
  return dir.string();
}

// Two units, [w0 | b0] and [w1 | b1], of 61,100 and 30,030 elements: w decayed, b not. `Shards`
// holds one rank's (of 2) shards of them, made from seeded values.
struct Shards {
  std::vector<Variable> params;
  std::vector<optim::ParamGroup> groups;
  std::vector<FlatShard> shards;
};

Shards make_shards(int rank) {
  Shards s;
  Generator g(7);
  const std::vector<Shape> shapes = {{200, 305}, {100}, {300, 100}, {30}};
  const char* names[] = {"w0", "b0", "w1", "b1"};
  for (size_t i = 0; i < shapes.size(); ++i) {
    s.params.emplace_back(randn(shapes[i], kF32, &g), true);
    s.params.back().set_name(names[i]);
  }
  s.groups.emplace_back(std::vector<Variable>{s.params[0], s.params[2]},
                        optim::AdamOptions(1e-2).weight_decay(0.1).clone());
  s.groups.emplace_back(std::vector<Variable>{s.params[1], s.params[3]},
                        optim::AdamOptions(3e-3).weight_decay(0).clone());
  for (size_t first : {0, 2}) {
    FlatShard f;
    f.params = {s.params[first], s.params[first + 1]};
    f.layout = flat_layout({s.params[first].numel(), s.params[first + 1].numel()});
    const int64_t size = padded_size(f.layout.total, 2) / 2;
    f.range = {rank * size, (rank + 1) * size};
    Tensor flat = zeros({2 * size}, kF32);
    flat.narrow(0, 0, s.params[first].numel()).copy_(s.params[first].data().reshape({-1}));
    flat.narrow(0, s.params[first].numel(), s.params[first + 1].numel())
        .copy_(s.params[first + 1].data().reshape({-1}));
    f.shard = Variable(flat.narrow(0, f.range.begin, size).clone(), true);
    s.shards.push_back(f);
  }
  return s;
}

void give_gradients(const Shards& s, int step) {
  Generator g(100 + step);
  for (const FlatShard& f : s.shards) f.shard.set_grad(randn({f.shard.numel()}, kF32, &g));
}

Offload disk(const std::string& dir) {
  return Offload().optimizer(OffloadTier::kDisk).dir(dir).piece_numel(1024);
}

void expect_equal_shards(const Shards& a, const Shards& b, const std::string& what) {
  for (size_t u = 0; u < a.shards.size(); ++u) {
    EXPECT_TRUE(allclose(a.shards[u].shard.data(), b.shards[u].shard.data(), 0, 0))
        << what << ": unit " << u << " differs by "
        << max_abs_diff(a.shards[u].shard.data(), b.shards[u].shard.data());
  }
}

void expect_equal_states(const StateDict& a, const StateDict& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [key, t] : a) {
    ASSERT_TRUE(b.contains(key)) << what << ": " << key;
    EXPECT_TRUE(t.shape() == b.at(key).shape() && allclose(t.to(kF64), b.at(key).to(kF64), 0, 0))
        << what << ": " << key;
  }
}

GroupedOptimizerFactory adamw() { return grouped_factory<optim::AdamW>(optim::AdamOptions(1e-3)); }

void equals_in_memory(const Offload& offload, const std::string& what) {
  for (int rank = 0; rank < 2; ++rank) {
    Shards mem = make_shards(rank), off = make_shards(rank);
    GroupedShardOptimizer in_memory(mem.shards, mem.groups, adamw());
    GroupedShardOptimizer offloaded(off.shards, off.groups, adamw(), offload);
    ASSERT_NE(offloaded.swapper(), nullptr);
    EXPECT_EQ(offloaded.swapper()->tier(), offload.optimizer());
    // Two state tensors per element, in whole 4 KiB blocks per swapped piece.
    EXPECT_GE(offloaded.swapper()->offloaded_bytes(), 2 * 4 * (mem.shards[0].shard.numel() +
                                                               mem.shards[1].shard.numel()));
    EXPECT_GT(offloaded.swapper()->pieces().size(), 40u) << "pieces of 1024 elements";
    for (int step = 0; step < 5; ++step) {
      give_gradients(mem, step);
      give_gradients(off, step);
      if (step == 3) {  // a schedule changes a group's learning rate
        in_memory.param_groups()[1].options->set_lr(5e-3);
        offloaded.param_groups()[1].options->set_lr(5e-3);
      }
      in_memory.step();
      offloaded.step();
      expect_equal_shards(mem, off, what + ", rank " + std::to_string(rank) + ", step " + std::to_string(step));
    }
    expect_equal_states(in_memory.state_dict(), offloaded.state_dict(), what + ": state dict");
    // Steps 2-5 read the whole state, as did the state dict; every step wrote it.
    EXPECT_EQ(offloaded.swapper()->bytes_read(), 5 * offloaded.swapper()->offloaded_bytes());
    EXPECT_EQ(offloaded.swapper()->bytes_written(), 5 * offloaded.swapper()->offloaded_bytes());
  }
}

TEST(OffloadedShardOptimizer, DiskTierEqualsInMemoryBitForBit) {
  equals_in_memory(disk(scratch("disk")), "disk");
}

TEST(OffloadedShardOptimizer, HostTierEqualsInMemoryBitForBit) {
  equals_in_memory(Offload().optimizer(OffloadTier::kHost).piece_numel(1024), "host");
}

// Saved from the in-memory optimizer after 2 steps, loaded into an offloaded one (and the other
// way), 3 more steps: equal to 5 uninterrupted in-memory steps.
TEST(OffloadedShardOptimizer, StateDictMovesBetweenInMemoryAndOffloaded) {
  Shards whole = make_shards(0);
  GroupedShardOptimizer uninterrupted(whole.shards, whole.groups, adamw());
  Shards first = make_shards(0);
  GroupedShardOptimizer writer(first.shards, first.groups, adamw());
  for (int step = 0; step < 5; ++step) {
    give_gradients(whole, step);
    uninterrupted.step();
    if (step < 2) {
      give_gradients(first, step);
      writer.step();
    }
  }
  Shards resumed = make_shards(0);
  for (size_t u = 0; u < 2; ++u) Tensor(resumed.shards[u].shard.data()).copy_(first.shards[u].shard.data());
  GroupedShardOptimizer offloaded(resumed.shards, resumed.groups, adamw(), disk(scratch("resume")));
  offloaded.load_state_dict(writer.state_dict());
  expect_equal_states(writer.state_dict(), offloaded.state_dict(), "loaded");
  for (int step = 2; step < 5; ++step) {
    give_gradients(resumed, step);
    offloaded.step();
  }
  expect_equal_shards(whole, resumed, "resumed offloaded");
  expect_equal_states(uninterrupted.state_dict(), offloaded.state_dict(), "resumed offloaded");
  // And back into memory.
  Shards back = make_shards(0);
  for (size_t u = 0; u < 2; ++u) Tensor(back.shards[u].shard.data()).copy_(resumed.shards[u].shard.data());
  GroupedShardOptimizer in_memory(back.shards, back.groups, adamw());
  in_memory.load_state_dict(offloaded.state_dict());
  expect_equal_states(uninterrupted.state_dict(), in_memory.state_dict(), "back in memory");
  testing::expect_error([&] {
    StateDict bad = writer.state_dict();
    bad.set("state.0.momentum_buffer", bad.at("state.0.exp_avg"));
    offloaded.load_state_dict(bad);
  }, "'state.0.momentum_buffer' is state this optimizer does not keep (it keeps [exp_avg, exp_avg_sq])");
}

// SGD with momentum makes its buffer from the first gradient (not from zeros): a piece that has
// never stepped must reach it without state.
TEST(OffloadedShardOptimizer, SgdWithMomentumEqualsInMemory) {
  const auto sgd = grouped_factory<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  Shards mem = make_shards(1), off = make_shards(1);
  for (Shards* s : {&mem, &off}) {  // SGD's options: the first group's own, the second's defaults
    s->groups[0].options = optim::SGDOptions(0.05).momentum(0.8).weight_decay(0.01).clone();
    s->groups[1].options = nullptr;
  }
  GroupedShardOptimizer in_memory(mem.shards, mem.groups, sgd);
  GroupedShardOptimizer offloaded(off.shards, off.groups, sgd, disk(scratch("sgd")));
  for (int step = 0; step < 3; ++step) {
    give_gradients(mem, step);
    give_gradients(off, step);
    in_memory.step();
    offloaded.step();
  }
  expect_equal_shards(mem, off, "sgd");
  expect_equal_states(in_memory.state_dict(), offloaded.state_dict(), "sgd");
}

// Bytes held after three steps, the gradients dropped: the offloaded optimizer holds its
// staging slots and one piece's state, the in-memory one the shard's whole state.
int64_t resident_after_steps(const Offload& offload, int64_t* state_bytes) {
  Shards s = make_shards(0);
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  {
    GroupedShardOptimizer opt(s.shards, s.groups, adamw(), offload);
    for (int step = 0; step < 3; ++step) {
      give_gradients(s, step);
      opt.step();
      opt.zero_grad();
    }
    const int64_t held = memory_stats(Device::cpu()).current_bytes - before;
    *state_bytes = opt.state_bytes();
    return held;
  }
}

TEST(OffloadedShardOptimizer, ResidentBytesFallByTheStateSize) {
  int64_t mem_state = 0, off_state = 0;
  const int64_t in_memory = resident_after_steps(Offload(), &mem_state);
  const int64_t offloaded = resident_after_steps(disk(scratch("memory")), &off_state);
  // Adam: exp_avg and exp_avg_sq of 45,565 elements per rank.
  EXPECT_EQ(mem_state, 2 * 4 * (30550 + 15015));
  EXPECT_EQ(in_memory, mem_state);
  // Offloaded: 4 staging slots x 2 state tensors of one piece (4 KiB, and a block for
  // alignment) and the last piece's state in the inner optimizer (and two one-element
  // windows): 72 KiB, not 356 KiB.
  EXPECT_LE(offloaded, 4 * 2 * 2 * 4096 + off_state + 64) << "in memory: " << in_memory;
  EXPECT_LE(off_state, 2 * 4096);
  EXPECT_LT(offloaded, in_memory - mem_state + 80 * 1024);
}

// The schedule of a step, seen from inside the inner optimizer: when piece a (of 4, each two
// state tensors of 4 KiB) is updated, the read of piece a + 1 has already been posted
// (prefetch), and the writes of pieces 0 .. a-1 have been posted but not waited for
// (write-behind: the step goes on while they run).
struct StepLog {
  const offload::OptimizerSwapper* swapper = nullptr;
  std::vector<std::pair<int64_t, int64_t>> posted;  // (bytes read, written) at each update
};
StepLog step_log;

class RecordingAdam : public optim::Adam {
 public:
  RecordingAdam(std::vector<optim::ParamGroup> groups, const optim::AdamOptions& defaults)
      : Adam(std::move(groups), defaults) {}

 protected:
  void update_group(const optim::OptimizerOptions& options, std::vector<PendingUpdate>& updates) override {
    if (step_log.swapper != nullptr && !updates.empty()) {
      step_log.posted.emplace_back(step_log.swapper->bytes_read(), step_log.swapper->bytes_written());
    }
    Adam::update_group(options, updates);
  }
};

TEST(OffloadedShardOptimizer, PrefetchesTheNextPieceAndWritesBehind) {
  Variable p(randn({4096}, kF32), true);
  p.set_name("w");
  FlatShard f;
  f.params = {p};
  f.layout = flat_layout({4096});
  f.range = {0, 4096};
  f.shard = Variable(p.data().clone(), true);
  GroupedShardOptimizer opt({f}, {optim::ParamGroup({p})},
                            grouped_factory<RecordingAdam>(optim::AdamOptions(1e-3)),
                            disk(scratch("schedule")));
  ASSERT_EQ(opt.swapper()->pieces().size(), 4u);
  step_log.swapper = opt.swapper();
  f.shard.set_grad(ones({4096}, kF32));
  opt.step();  // the first step reads nothing (no state yet) and writes every piece
  const int64_t read0 = opt.swapper()->bytes_read(), written0 = opt.swapper()->bytes_written();
  EXPECT_EQ(written0, 4 * 8192);
  step_log.posted.clear();
  opt.step();
  step_log.swapper = nullptr;
  ASSERT_EQ(step_log.posted.size(), 4u);
  for (int64_t a = 0; a < 4; ++a) {
    EXPECT_EQ(step_log.posted[a].first - read0, std::min<int64_t>(a + 2, 4) * 8192) << "piece " << a;
    EXPECT_EQ(step_log.posted[a].second - written0, a * 8192) << "piece " << a;
  }
}

}  // namespace
}  // namespace zero
}  // namespace dist
}  // namespace tessera
