// ZeRO-1, 2 and 3 with the optimizer state offloaded to disk, on 2 ranks, against the same runs
// with the state in memory: parameters and optimizer state bit for bit after 4 steps, with f32
// parameters and with bf16 ones (ZeRO-1/2: bf16 parameters, f32 master shard; ZeRO-3: units
// gathered in bf16 over f32 shards), AdamW over a decayed and a spared group; a sharded
// checkpoint saved after 2 offloaded steps and resumed into a fresh offloaded run equals the 5
// uninterrupted in-memory steps; the bytes held (the counting allocator) fall by the state's
// size; the offload files are gone once the optimizer is. ZeRO-3 with everything offloaded too,
// its units chosen child by child or by an auto-wrap policy (the model run by its own forward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/auto_wrap_policy.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/fully_sharded_optimizer_state.h"
#include "dist/zero/offload/optimizer_swapper.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "tensor/allocator.h"
#include "tensor/deferred_init.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kPerRank = 4;

std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = (fs::path(tmp != nullptr ? tmp : "/tmp") / ("zero_offload_" + name)).string();
  auto world = dist::world();
  if (world->rank() == 0) fs::remove_all(dir);
  world->barrier()->wait();
  return dir;
}

// 32 -> w -> w -> 10 (w = 96: 13,450 parameters, several 1024-element pieces per rank and group).
std::shared_ptr<nn::Sequential> mlp(DType dtype, uint64_t seed, int64_t w = 96) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(32, w));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(w, w));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(w, 10));
  m->to(dtype);
  return m;
}

// GPT-2's split: matrices decayed, biases not.
std::vector<optim::ParamGroup> groups_of(const std::vector<Variable>& params) {
  std::vector<Variable> decay, spare;
  for (const Variable& p : params) (p.dim() == 2 ? decay : spare).push_back(p);
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(decay, optim::AdamOptions(2e-2).weight_decay(0.1).clone());
  groups.emplace_back(spare, optim::AdamOptions(1e-2).weight_decay(0).clone());
  return groups;
}

zero::GroupedOptimizerFactory adamw() {
  return zero::grouped_factory<optim::AdamW>(optim::AdamOptions(1e-3));
}

Offload disk(const std::string& dir) {
  return Offload().optimizer(OffloadTier::kDisk).dir(dir).piece_numel(1024);
}

std::pair<Tensor, Tensor> batch(int step) {
  auto world = dist::world();
  Generator g(500 + step);
  const Tensor x = randn({kPerRank * world->size(), 32}, kF32, &g);
  const Tensor y = argmax(x.narrow(1, 0, 10), 1);
  return {x.narrow(0, kPerRank * world->rank(), kPerRank),
          y.narrow(0, kPerRank * world->rank(), kPerRank)};
}

// A run of one strategy: train, its model's state, its optimizer's full state (collective).
class Run {
 public:
  virtual ~Run() = default;
  virtual void train(int from, int to) = 0;
  virtual StateDict model_state() = 0;
  virtual StateDict optimizer_state() = 0;
  virtual void save(const std::string& dir, int step) = 0;
  virtual void load(const std::string& dir) = 0;
  virtual const offload::OptimizerSwapper* swapper() const = 0;
};

// ZeRO-1/2 over a model of `dtype` parameters (bf16: the shard is their f32 master).
class ZeroRun : public Run {
 public:
  ZeroRun(int stage, DType dtype, const Offload& offload, uint64_t seed = 11, int64_t width = 96)
      : dtype_(dtype), net_(mlp(dtype, seed, width)),
        opt_(net_->parameters(), groups_of(net_->parameters()), dist::world(), adamw(),
             ZeroOptions().stage(stage).offload(offload)) {}
  void train(int from, int to) override {
    for (int step = from; step < to; ++step) {
      const auto [x, y] = batch(step);
      opt_.zero_grad();
      cross_entropy(net_->forward(Variable(x.to(dtype_))), y).backward();
      opt_.step();
    }
  }
  StateDict model_state() override { return net_->state_dict(); }
  StateDict optimizer_state() override { return opt_.state_dict(); }
  void save(const std::string& dir, int step) override {
    TrainingProgress progress;
    progress.step = step;
    zero::save_sharded_checkpoint(dir, *net_, opt_, progress);
  }
  void load(const std::string& dir) override { zero::load_sharded_checkpoint(dir, *net_, &opt_); }
  const offload::OptimizerSwapper* swapper() const override { return opt_.inner().swapper(); }
  ZeroRedundancyOptimizer& optimizer() { return opt_; }

 private:
  DType dtype_;
  std::shared_ptr<nn::Sequential> net_;
  ZeroRedundancyOptimizer opt_;
};

// The MLP built under DeferredInit (tensor/deferred_init.h): no bytes until the wrapper
// materializes each unit.
std::shared_ptr<nn::Sequential> deferred_mlp(uint64_t seed, int64_t width) {
  DeferredInit deferred;
  return mlp(kF32, seed, width);
}

// How a ZeRO-3 run trains: micro-batches per step (gradient accumulation), gradient clipping.
struct Zero3Training {
  int micro_batches = 1;
  double clip = 0;  // 0: none
  bool deferred = false;
  int64_t width = 96;
  // Units by an auto-wrap policy (size_based_wrap_policy(1000)): the model run by its own
  // forward, each unit gathered by its hooks, instead of child by child (the same units).
  bool policy = false;
};

// ZeRO-3 with every Linear a unit; `mixed`: gathered in bf16 under bf16 autocast. The wrapper
// takes the offload's parameter and gradient tiers, the optimizer its state's.
class Zero3Run : public Run {
 public:
  Zero3Run(bool mixed, const Offload& offload, uint64_t seed = 11,
           const Zero3Training& training = Zero3Training())
      : mixed_(mixed), training_(training),
        net_(training.deferred ? deferred_mlp(seed, training.width) : mlp(kF32, seed, training.width)),
        groups_(groups_of(net_->parameters())),
        fsdp_(net_, dist::world(),
              (training.policy ? FullyShardedOptions().auto_wrap_policy(size_based_wrap_policy(1000))
                               : FullyShardedOptions().min_num_params(1000))
                  .offload(offload)
                  .mixed_precision(mixed ? MixedPrecision().param_dtype(kBF16) : MixedPrecision())),
        opt_(fsdp_.flat_shards(), groups_, adamw(), offload) {}
  void train(int from, int to) override {
    for (int step = from; step < to; ++step) {
      opt_.zero_grad();
      for (int m = 0; m < training_.micro_batches; ++m) {
        const auto [x, y] = batch(step * training_.micro_batches + m);
        Variable loss;
        {
          AutocastGuard guard(kBF16, /*enabled=*/mixed_);
          loss = cross_entropy(fsdp_.forward(Variable(x)), y);
        }
        loss.backward();
      }
      if (training_.clip > 0) norms_.push_back(fsdp_.clip_grad_norm(training_.clip));
      opt_.step();
    }
  }
  FullyShardedDataParallel& fsdp() { return fsdp_; }
  zero::GroupedShardOptimizer& optimizer() { return opt_; }
  const std::vector<double>& norms() const { return norms_; }
  StateDict model_state() override { return fsdp_.state_dict(); }
  StateDict optimizer_state() override { return zero::gather_optimizer_state(fsdp_, opt_); }
  void save(const std::string& dir, int step) override {
    TrainingProgress progress;
    progress.step = step;
    zero::save_sharded_checkpoint(dir, fsdp_, &opt_, progress);
  }
  void load(const std::string& dir) override { zero::load_sharded_checkpoint(dir, fsdp_, &opt_); }
  const offload::OptimizerSwapper* swapper() const override { return opt_.swapper(); }

 private:
  bool mixed_;
  Zero3Training training_;
  std::shared_ptr<nn::Sequential> net_;
  std::vector<optim::ParamGroup> groups_;
  FullyShardedDataParallel fsdp_;
  std::vector<double> norms_;
  zero::GroupedShardOptimizer opt_;
};

void expect_bit_equal(const StateDict& a, const StateDict& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [key, t] : a) {
    ASSERT_TRUE(b.contains(key)) << what << ": " << key;
    EXPECT_TRUE(t.dtype() == b.at(key).dtype() &&
                allclose(t.to(kF64), b.at(key).to(kF64), 0, 0))
        << what << ": " << key << " differs by " << max_abs_diff(t.to(kF64), b.at(key).to(kF64));
  }
}

void expect_same_runs(Run& in_memory, Run& offloaded, const std::string& what) {
  expect_bit_equal(in_memory.model_state(), offloaded.model_state(), what + ", parameters");
  expect_bit_equal(in_memory.optimizer_state(), offloaded.optimizer_state(), what + ", optimizer state");
}

using MakeRun = std::function<std::unique_ptr<Run>(const Offload&, uint64_t seed)>;

void equals_in_memory(const MakeRun& make, const std::string& what) {
  std::string name = what;
  std::replace(name.begin(), name.end(), ' ', '_');
  const std::string dir = scratch(name);
  std::unique_ptr<Run> in_memory = make(Offload(), 11);
  in_memory->train(0, 4);
  {
    std::unique_ptr<Run> offloaded = make(disk(dir), 11);
    ASSERT_NE(offloaded->swapper(), nullptr);
    EXPECT_EQ(offloaded->swapper()->tier(), OffloadTier::kDisk);
    EXPECT_GE(offloaded->swapper()->pieces().size(), 4u) << what;
    offloaded->train(0, 4);
    // Steps 2 to 4 read the state, and every step wrote it.
    EXPECT_EQ(offloaded->swapper()->bytes_read(), 3 * offloaded->swapper()->offloaded_bytes());
    EXPECT_EQ(offloaded->swapper()->bytes_written(), 4 * offloaded->swapper()->offloaded_bytes());
    expect_same_runs(*in_memory, *offloaded, what);
    EXPECT_FALSE(fs::is_empty(dir));
  }
  // Every rank's files removed with its optimizer.
  dist::world()->barrier()->wait();
  EXPECT_TRUE(fs::is_empty(dir)) << what << ": " << dir << " still holds files";
  dist::world()->barrier()->wait();
}

MakeRun zero(int stage, DType dtype) {
  return [=](const Offload& o, uint64_t seed) { return std::make_unique<ZeroRun>(stage, dtype, o, seed); };
}
MakeRun zero3(bool mixed) {
  return [=](const Offload& o, uint64_t seed) { return std::make_unique<Zero3Run>(mixed, o, seed); };
}

TEST(ZeroOffload, Stage1F32EqualsInMemory) { equals_in_memory(zero(1, kF32), "ZeRO-1 f32"); }
TEST(ZeroOffload, Stage1Bf16EqualsInMemory) { equals_in_memory(zero(1, kBF16), "ZeRO-1 bf16"); }
TEST(ZeroOffload, Stage2F32EqualsInMemory) { equals_in_memory(zero(2, kF32), "ZeRO-2 f32"); }
TEST(ZeroOffload, Stage2Bf16EqualsInMemory) { equals_in_memory(zero(2, kBF16), "ZeRO-2 bf16"); }
TEST(ZeroOffload, Stage3F32EqualsInMemory) { equals_in_memory(zero3(false), "ZeRO-3 f32"); }
TEST(ZeroOffload, Stage3MixedBf16EqualsInMemory) { equals_in_memory(zero3(true), "ZeRO-3 bf16"); }

// 2 offloaded steps, a sharded checkpoint, a fresh offloaded run (another initial model) loads it
// and takes 3 more: equal to 5 uninterrupted in-memory steps.
void resumes_exactly(const MakeRun& make, const std::string& what,
                     const std::function<Offload(const std::string&)>& offload = disk) {
  std::unique_ptr<Run> uninterrupted = make(Offload(), 11);
  uninterrupted->train(0, 5);
  std::string name = what;
  std::replace(name.begin(), name.end(), ' ', '_');
  const std::string checkpoint = scratch("checkpoint_" + name);
  {
    std::unique_ptr<Run> writer = make(offload(scratch("writer_" + name)), 11);
    writer->train(0, 2);
    writer->save(checkpoint, 2);
  }
  std::unique_ptr<Run> resumed = make(offload(scratch("resumed_" + name)), 77);
  resumed->load(checkpoint);
  resumed->train(2, 5);
  expect_same_runs(*uninterrupted, *resumed, what + ", resumed");
}

TEST(ZeroOffload, Stage1ResumesExactly) { resumes_exactly(zero(1, kF32), "ZeRO-1 f32"); }
TEST(ZeroOffload, Stage2Bf16ResumesExactly) { resumes_exactly(zero(2, kBF16), "ZeRO-2 bf16"); }
TEST(ZeroOffload, Stage3MixedResumesExactly) { resumes_exactly(zero3(true), "ZeRO-3 bf16"); }

// ZeRO-Infinity: each unit's master shard and gradient shard offloaded too (Offload::all).
Offload all(OffloadTier tier, const std::string& dir) {
  return Offload().all(tier).dir(dir).piece_numel(1024);
}

// 3 steps with everything offloaded equal the in-memory run bit for bit (parameters, optimizer
// state, clipping's norms); at rest and after the steps no unit's shard or gradient is in memory.
void all_offloaded_equals_in_memory(bool mixed, OffloadTier tier, const Zero3Training& training,
                                    const std::string& what) {
  std::string name = what;
  std::replace(name.begin(), name.end(), ' ', '_');
  const std::string dir = scratch(name);
  Zero3Training eager = training;
  eager.deferred = false;
  Zero3Run in_memory(mixed, Offload(), 11, eager);
  in_memory.train(0, 3);
  {
    Zero3Run offloaded(mixed, all(tier, dir), 11, training);
    for (const auto& unit : offloaded.fsdp().units()) {
      ASSERT_NE(unit->home(), nullptr) << what;
      EXPECT_EQ(unit->shard().numel(), 0) << what << ": " << unit->name() << " resident at rest";
    }
    offloaded.train(0, 3);
    for (const auto& unit : offloaded.fsdp().units()) {
      EXPECT_EQ(unit->shard().numel(), 0) << what << ": " << unit->name() << " resident after steps";
      EXPECT_FALSE(unit->shard().grad().defined()) << what << ": " << unit->name();
      EXPECT_TRUE(unit->home()->has_gradient()) << what << ": " << unit->name();
    }
    expect_same_runs(in_memory, offloaded, what);
    EXPECT_EQ(in_memory.norms(), offloaded.norms()) << what;
    if (training.clip > 0) EXPECT_GT(in_memory.norms()[0], training.clip) << what << ": clipping never scaled";
    if (tier == OffloadTier::kDisk) EXPECT_FALSE(fs::is_empty(dir));
    offloaded.optimizer().zero_grad();
    for (const auto& unit : offloaded.fsdp().units()) EXPECT_FALSE(unit->home()->has_gradient());
  }
  dist::world()->barrier()->wait();
  if (tier == OffloadTier::kDisk) EXPECT_TRUE(fs::is_empty(dir)) << what << ": " << dir << " still holds files";
  dist::world()->barrier()->wait();
}

TEST(ZeroOffload, Stage3AllOnDiskF32EqualsInMemory) {
  all_offloaded_equals_in_memory(false, OffloadTier::kDisk, {}, "ZeRO-3 all on disk f32");
}
TEST(ZeroOffload, Stage3AllOnHostMixedBf16EqualsInMemory) {
  all_offloaded_equals_in_memory(true, OffloadTier::kHost, {}, "ZeRO-3 all on host bf16");
}
// Two micro-batches per step (the second backward adds to the gradient in the store), clipping
// (the norm summed unit by unit, the gradients scaled in the store), and the model built under
// DeferredInit (materialized unit by unit) against the eagerly built in-memory run.
TEST(ZeroOffload, Stage3AllOnDiskAccumulatesClipsAndDefers) {
  Zero3Training t;
  t.micro_batches = 2;
  t.clip = 0.5;
  t.deferred = true;
  all_offloaded_equals_in_memory(false, OffloadTier::kDisk, t, "ZeRO-3 all on disk accumulated");
}
// The same under an auto-wrap policy (FullyShardedDataParallel on any module), bf16 on disk.
TEST(ZeroOffload, Stage3AllOnDiskUnderAWrapPolicyMixedBf16EqualsInMemory) {
  Zero3Training t;
  t.micro_batches = 2;
  t.clip = 0.5;
  t.deferred = true;
  t.policy = true;
  all_offloaded_equals_in_memory(true, OffloadTier::kDisk, t, "ZeRO-3 all on disk, policy, bf16");
}
TEST(ZeroOffload, Stage3AllOnDiskResumesExactly) {
  resumes_exactly(zero3(false), "ZeRO-3 all f32",
                  [](const std::string& dir) { return all(OffloadTier::kDisk, dir); });
}

// Between steps an all-offloaded ZeRO-3 run holds none of its shards, gradients or state: the
// bytes held after 3 steps (once the last writes have landed) fall by at least 4 shard-sized
// vectors (master, gradient, exp_avg, exp_avg_sq) less the staging slots.
TEST(ZeroOffload, Stage3AllOffloadedHoldsNoShards) {
  Zero3Training t;
  t.width = 320;
  const auto held = [&](const Offload& offload) {
    const int64_t before = memory_stats(Device::cpu()).current_bytes;
    Zero3Run run(false, offload, 11, t);
    run.train(0, 3);
    run.fsdp().finish_offload_transfers();  // the last step's write-behind lands
    return memory_stats(Device::cpu()).current_bytes - before;
  };
  const int64_t in_memory = held(Offload());
  const int64_t offloaded = held(all(OffloadTier::kDisk, scratch("held")));
  const int64_t shard = 116490 / 2 * 4;  // bytes of one f32 vector of this rank's elements
  if (dist::world()->rank() == 0) {
    std::printf("[ measured ] ZeRO-3 width 320, held after 3 steps: in memory %lld bytes, all "
                "offloaded to disk %lld bytes (4 shard vectors: %lld)\n",
                static_cast<long long>(in_memory), static_cast<long long>(offloaded),
                static_cast<long long>(4 * shard));
  }
  const int64_t staging = 4 * 2 * 2 * 4096 + 64;
  EXPECT_LE(offloaded, in_memory - 4 * shard + staging) << "in memory " << in_memory;
}

// The bytes a ZeRO-2 run holds after its steps (gradients dropped): offloaded, neither the
// shard's Adam state nor the f32 shard itself (the master of bf16 parameters, a copy of f32 ones)
// stays in memory between steps; the staging slots and one piece's state do.
int64_t held_after_steps(DType dtype, const Offload& offload, int64_t* inner_state) {
  const int64_t before = memory_stats(Device::cpu()).current_bytes;
  ZeroRun run(2, dtype, offload, 11, 320);
  run.train(0, 3);
  run.optimizer().zero_grad();
  *inner_state = run.optimizer().inner().state_bytes();
  return memory_stats(Device::cpu()).current_bytes - before;
}

void resident_bytes_fall(DType dtype) {
  int64_t state_in_memory = 0, state_offloaded = 0;
  const int64_t in_memory = held_after_steps(dtype, Offload(), &state_in_memory);
  const int64_t offloaded = held_after_steps(dtype, disk(scratch("memory")), &state_offloaded);
  const int64_t shard = 116490 / 2;  // this rank's elements (2 ranks; width 320)
  EXPECT_EQ(state_in_memory, 2 * 4 * shard);
  if (dist::world()->rank() == 0) {
    std::printf("[ measured ] ZeRO-2 %s, held after 3 steps: in memory %lld bytes (Adam state "
                "%lld, f32 shard %lld), offloaded to disk %lld bytes (state resident %lld)\n",
                dtype == kF32 ? "f32" : "bf16", static_cast<long long>(in_memory),
                static_cast<long long>(state_in_memory), static_cast<long long>(4 * shard),
                static_cast<long long>(offloaded), static_cast<long long>(state_offloaded));
  }
  // Staging: 4 slots x 2 state tensors x (one 4 KiB piece + a block for alignment), and the
  // shard's one-element stand-in.
  const int64_t staging = 4 * 2 * 2 * 4096 + 64;
  EXPECT_LE(offloaded, in_memory - state_in_memory - 4 * shard + staging + state_offloaded)
      << "in memory " << in_memory << ", offloaded " << offloaded;
  EXPECT_LT(offloaded, in_memory - state_in_memory);
}

TEST(ZeroOffload, ResidentBytesFallByTheStateAndShardF32) { resident_bytes_fall(kF32); }
TEST(ZeroOffload, ResidentBytesFallByTheStateAndMasterBf16) { resident_bytes_fall(kBF16); }

// A directory that cannot be made (its path runs through a file) and a disk too small for the
// state are errors at construction, before any step, naming the directory and the bytes.
TEST(ZeroOffload, BadDirectoriesAreErrorsBeforeTraining) {
  const std::string dir = scratch("errors");
  const std::string file = dir + "/not_a_directory";
  if (dist::world()->rank() == 0) {
    fs::create_directories(dir);
    std::ofstream(file) << "x";
  }
  dist::world()->barrier()->wait();
  try {
    ZeroRun run(2, kF32, disk(file + "/offload"));
    ADD_FAILURE() << "no error for an offload directory below a file";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("GroupedShardOptimizer (offloaded): the offload directory '" +
                                         file + "/offload' is not a directory and cannot be created"),
              std::string::npos)
        << e.what();
  }
  dist::world()->barrier()->wait();
}

}  // namespace
}  // namespace dist
}  // namespace tessera
