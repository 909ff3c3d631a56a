// Sharded checkpoints (dist/zero/sharded_checkpoint.h), on 3 ranks. A checkpoint written on the
// 3 ranks after 3 steps is read back on 3, on a 2-rank and on a 1-rank sub-group
// (dist::new_group), and one written on 2 ranks on all 3, for ZeRO stages 1, 2 and 3 with SGD
// momentum and Adam, into a plain single-process model and optimizer, and a full checkpoint into
// a ZeRO-3 run. Asserted:
//   - what was loaded equals what was saved bit for bit (the consolidated model and ZeRO-1/2
//     optimizer state; for ZeRO-3 the model state), on every world size;
//   - resuming on the same world size and continuing 2 steps equals the uninterrupted run bit for
//     bit;
//   - resuming on another world size equals it to 1e-12 (f64): the gradient is then averaged
//     over 2 or 1 ranks' partial means instead of 3, a different summation order, so the last
//     bits may differ; nothing else does;
//   - errors: a missing shard file, a file from another save, a file whose tensor disagrees with
//     the index, a model whose shapes or dtypes disagree with the layout, an optimizer asked of
//     a checkpoint without one, and one rank failing to write: every rank throws.
#include "dist/zero/sharded_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "autograd/functions.h"
#include "dist/environment.h"
#include "dist/zero/checkpoint_index.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace zero {
namespace {

constexpr int64_t kBatch = 6;  // divisible by 1, 2 and 3: every world size sees the same batch

// 8x7+7 + 7x5+5 + 5x3+3 = 121 parameters: not divisible by 2 or 3, so shards are uneven (stages
// 1-2) or padded (stage 3).
std::shared_ptr<nn::Sequential> mlp(uint64_t seed = 31, DType dtype = kF64) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 7), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(7, 5), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(5, 3)});
  m->to(dtype);
  return m;
}

// This rank's part of step `step`'s batch.
std::pair<Tensor, Tensor> batch(int step, int world, int rank) {
  Generator g(500 + step);
  const Tensor x = randn({kBatch, 8}, kF64, &g);
  const Tensor y = from_vector(std::vector<int64_t>{0, 1, 2, 2, 1, 0}, {kBatch});
  const int64_t n = kBatch / world;
  return {x.narrow(0, rank * n, n), y.narrow(0, rank * n, n)};
}

using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable>)>;
Factory sgd() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9));
  };
}
Factory adam() {
  return [](std::vector<Variable> p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01));
  };
}

// A model and optimizer under one strategy: stage 0 is a plain single-process run, 1-2
// ZeroRedundancyOptimizer, 3 FullyShardedDataParallel (one unit per Linear).
struct Trainer {
  Trainer(int stage, const Factory& make, std::shared_ptr<ProcessGroup> group, uint64_t seed = 31,
          DType dtype = kF64)
      : stage(stage), group(group), model(mlp(seed, dtype)), dtype(dtype) {
    if (stage == 3) {
      fsdp = std::make_unique<FullyShardedDataParallel>(model, group,
                                                        FullyShardedOptions().min_num_params(1));
      opt = make(fsdp->shard_parameters());
    } else if (stage > 0) {
      opt = std::make_unique<ZeroRedundancyOptimizer>(model->parameters(), group, make,
                                                      ZeroOptions().stage(stage));
    } else {
      opt = make(model->parameters());
    }
  }
  int world() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank() : 0; }
  void train(int from, int to) {
    for (int step = from; step < to; ++step) {
      opt->zero_grad();
      const auto [x64, y] = batch(step, world(), rank());
      const Variable x(x64.to(dtype));
      const Variable out = fsdp ? fsdp->forward(x) : model->forward(x);
      cross_entropy(out, y).backward();
      opt->step();
    }
  }
  // Copies: a module's state_dict shares its parameters' storage, which later steps change.
  StateDict model_state() {
    StateDict copy;
    for (const auto& [name, t] : fsdp ? fsdp->state_dict() : model->state_dict()) {
      copy.set(name, t.clone());
    }
    return copy;
  }
  StateDict optimizer_state() const {
    StateDict copy;
    for (const auto& [name, t] : opt->state_dict()) copy.set(name, t.clone());
    return copy;
  }
  void save(const std::string& dir, int64_t step) {
    TrainingProgress p;
    p.step = step;
    p.epoch = 1;
    if (fsdp) {
      save_sharded_checkpoint(dir, *fsdp, opt.get(), p);
    } else {
      save_sharded_checkpoint(dir, *model, dynamic_cast<ZeroRedundancyOptimizer&>(*opt), p);
    }
  }
  TrainingProgress load(const std::string& source) {
    return fsdp ? load_sharded_checkpoint(source, *fsdp, opt.get())
                : load_sharded_checkpoint(source, *model, opt.get());
  }

  int stage;
  std::shared_ptr<ProcessGroup> group;
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<FullyShardedDataParallel> fsdp;
  std::unique_ptr<optim::Optimizer> opt;
  DType dtype;
};

void expect_equal(const StateDict& a, const StateDict& b, double tolerance, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << what << ": " << name;
    ASSERT_EQ(b.at(name).shape(), t.shape()) << what << ": " << name;
    const double diff = max_abs_diff(t.to(kF64), b.at(name).to(kF64));
    if (tolerance == 0) {
      EXPECT_EQ(diff, 0) << what << ": " << name;
    } else {
      EXPECT_LT(diff, tolerance) << what << ": " << name;
    }
  }
}

// A fresh directory shared by the ranks (the same TEST_TMPDIR on one machine).
std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/sharded_ckpt_" + name;
  auto world = dist::world();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  return dir;
}

// The first `n` world ranks as a group (nullptr on the others). Collective over the world.
std::shared_ptr<ProcessGroup> first_ranks(int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  return dist::new_group(ranks);
}

// Written on `writers` ranks after 3 steps; read on each of `readers` (a 1-rank reader also
// as a plain single-process run), then 2 more steps; compared with the uninterrupted run.
void resumes(int stage, const Factory& make, int writers, std::vector<int> readers,
             const std::string& name) {
  auto world = dist::world();
  ASSERT_EQ(world->size(), 3) << "run on 3 ranks";
  const std::string dir = scratch(name);
  StateDict saved_model, saved_opt, final_model;
  auto writer_group = first_ranks(writers);
  if (writer_group != nullptr) {
    Trainer run(stage, make, writer_group);
    run.train(0, 3);
    run.save(dir, 3);
    saved_model = run.model_state();
    if (stage < 3) saved_opt = run.optimizer_state();  // collective: the consolidated state
    run.train(3, 5);
    final_model = run.model_state();
  }
  world->barrier()->wait();
  for (int m : readers) {
    auto group = first_ranks(m);
    for (int reader_stage : m == 1 && stage > 0 ? std::vector<int>{stage, 0} : std::vector<int>{stage}) {
      if (group == nullptr || world->rank() >= writers) continue;
      const std::string what = name + ": " + std::to_string(writers) + " -> " + std::to_string(m) +
                               " ranks, stage " + std::to_string(reader_stage);
      Trainer run(reader_stage, make, reader_stage == 0 ? nullptr : group, /*seed=*/77);
      const TrainingProgress p = run.load(dir);
      EXPECT_EQ(p.step, 3) << what;
      EXPECT_EQ(p.epoch, 1) << what;
      expect_equal(saved_model, run.model_state(), 0, what + " (model loaded)");
      if (stage < 3) expect_equal(saved_opt, run.optimizer_state(), 0, what + " (optimizer loaded)");
      run.train(3, 5);
      expect_equal(final_model, run.model_state(), m == writers ? 0 : 1e-12, what + " (resumed)");
    }
    world->barrier()->wait();
  }
  // Readers larger than the writers (2 -> 3): everyone reads.
}

TEST(ShardedCheckpoint, Stage1SgdMomentumWrittenOn3ResumesOn3And2And1) {
  resumes(1, sgd(), 3, {3, 2, 1}, "stage1_sgd");
}
TEST(ShardedCheckpoint, Stage1AdamWrittenOn3ResumesOn3And2And1) {
  resumes(1, adam(), 3, {3, 2, 1}, "stage1_adam");
}
TEST(ShardedCheckpoint, Stage2AdamWrittenOn3ResumesOn3And2And1) {
  resumes(2, adam(), 3, {3, 2, 1}, "stage2_adam");
}
TEST(ShardedCheckpoint, Stage3SgdMomentumWrittenOn3ResumesOn3And2And1) {
  resumes(3, sgd(), 3, {3, 2, 1}, "stage3_sgd");
}
TEST(ShardedCheckpoint, Stage3AdamWrittenOn3ResumesOn3And2And1) {
  resumes(3, adam(), 3, {3, 2, 1}, "stage3_adam");
}

// Written on 2 ranks, read on 3: the third rank reads its range from the two files.
void resumes_on_more_ranks(int stage, const Factory& make, const std::string& name) {
  auto world = dist::world();
  const std::string dir = scratch(name);
  StateDict saved_model, final_model;
  auto pair = first_ranks(2);
  if (pair != nullptr) {
    Trainer run(stage, make, pair);
    run.train(0, 3);
    run.save(dir, 3);
    saved_model = run.model_state();
    run.train(3, 5);
    final_model = run.model_state();
  }
  // The reference states travel to rank 2 through the checkpoint itself: a plain 1-rank load
  // gives rank 2 the saved model, which the 2-rank run has just compared bit for bit above.
  world->barrier()->wait();
  Trainer run(stage, make, world, 77);
  run.load(dir);
  const StateDict loaded = run.model_state();
  run.train(3, 5);
  const StateDict resumed = run.model_state();
  if (pair != nullptr) {
    expect_equal(saved_model, loaded, 0, name + ": 2 -> 3 (model loaded)");
    expect_equal(final_model, resumed, 1e-12, name + ": 2 -> 3 (resumed)");
  }
}

TEST(ShardedCheckpoint, Stage2AdamWrittenOn2ResumesOn3) { resumes_on_more_ranks(2, adam(), "stage2_2to3"); }
TEST(ShardedCheckpoint, Stage3SgdMomentumWrittenOn2ResumesOn3) {
  resumes_on_more_ranks(3, sgd(), "stage3_2to3");
}

// ZeRO-3's checkpoint read by ZeRO-1 (another flat layout: one vector instead of one per unit).
TEST(ShardedCheckpoint, Stage3CheckpointResumesUnderStage1) {
  auto world = dist::world();
  const std::string dir = scratch("stage3_to_stage1");
  Trainer writer(3, adam(), world);
  writer.train(0, 3);
  writer.save(dir, 3);
  const StateDict saved = writer.model_state();
  writer.train(3, 5);
  const StateDict final_model = writer.model_state();
  Trainer reader(1, adam(), world, 77);
  reader.load(dir);
  expect_equal(saved, reader.model_state(), 0, "stage 3 -> stage 1 (model loaded)");
  reader.train(3, 5);
  // ZeRO-1 reduce-scatters one flat gradient, ZeRO-3 one per unit: same sums, to the last bits.
  expect_equal(final_model, reader.model_state(), 1e-12, "stage 3 -> stage 1 (resumed)");
}

// A full checkpoint (dist/checkpoint.h, the consolidated ZeRO state on rank 0) into ZeRO-3.
TEST(ShardedCheckpoint, FullCheckpointLoadsIntoStage3) {
  auto world = dist::world();
  const std::string dir = scratch("full_to_stage3");
  const std::string path = dir + "/full.safetensors";
  Trainer writer(2, sgd(), world);
  writer.train(0, 3);
  const StateDict model_state = writer.model_state();
  const StateDict opt_state = writer.optimizer_state();  // collective
  if (world->rank() == 0) {
    std::filesystem::create_directories(dir);
    save_checkpoint(path, model_state, &opt_state, TrainingProgress{0, 3, {}});
  }
  world->barrier()->wait();
  writer.train(3, 5);
  Trainer reader(3, sgd(), world, 77);
  EXPECT_EQ(reader.load(path).step, 3);
  expect_equal(model_state, reader.model_state(), 0, "full -> stage 3 (model loaded)");
  reader.train(3, 5);
  expect_equal(writer.model_state(), reader.model_state(), 1e-12, "full -> stage 3 (resumed)");
}

// f16 parameters: the f32 master values are what is saved (stages 1-2: the master shard;
// stage 3: the f32 shards), so a plain optimizer loaded from the checkpoint holds the same f32
// master copy as the ZeRO run's consolidated state, bit for bit, and the f16 model the same
// rounding of it.
TEST(ShardedCheckpoint, HalfParametersKeepTheirF32Master) {
  auto world = dist::world();
  for (int stage : {1, 3}) {
    const std::string dir = scratch("f16_stage" + std::to_string(stage));
    Trainer writer(stage, adam(), world, 31, kF16);
    writer.train(0, 2);
    writer.save(dir, 2);
    const StateDict model_state = writer.model_state();
    // The masters: ZeRO-1's consolidated state, or ZeRO-3's f32 shards gathered by its
    // state_dict (rounded to f16 there, so compare the masters through a ZeRO-1 reader).
    Trainer zero1(1, adam(), world, 77, kF16);
    zero1.load(dir);
    const StateDict consolidated = zero1.optimizer_state();
    if (stage == 1) expect_equal(writer.optimizer_state(), consolidated, 0, "f16: ZeRO-1 -> ZeRO-1");
    auto one = first_ranks(1);
    if (one != nullptr) {
      Trainer plain(0, adam(), nullptr, 77, kF16);
      plain.load(dir);
      expect_equal(model_state, plain.model_state(), 0, "f16: model");
      expect_equal(consolidated, plain.optimizer_state(), 0, "f16: optimizer with master");
      EXPECT_TRUE(plain.optimizer_state().contains("state.0.master"));
    }
    world->barrier()->wait();
  }
}

// ---- Errors -------------------------------------------------------------------------------------

// Every rank throws, with a message containing `part`.
void expect_error(const std::function<void()>& body, const std::string& part) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// A 3-rank stage-1 SGD checkpoint after one step, in a fresh directory.
std::string saved_checkpoint(const std::string& name) {
  const std::string dir = scratch(name);
  Trainer run(1, sgd(), dist::world());
  run.train(0, 1);
  run.save(dir, 1);
  dist::world()->barrier()->wait();
  return dir;
}

TEST(ShardedCheckpointErrors, AMissingShardFileIsNamed) {
  const std::string dir = saved_checkpoint("missing");
  const std::string file = shard_file_name(dir, 1, 3);
  if (dist::world()->rank() == 0) std::filesystem::remove(file);
  dist::world()->barrier()->wait();
  Trainer run(1, sgd(), dist::world());
  expect_error([&] { run.load(dir); }, "shard file '" + file + "' (rank 1 of the 3");
}

TEST(ShardedCheckpointErrors, AFileOfAnotherSaveIsRecognised) {
  const std::string dir = saved_checkpoint("mixed_a");
  const std::string other = saved_checkpoint("mixed_b");
  const std::string file = shard_file_name(dir, 2, 3);
  if (dist::world()->rank() == 0) {
    std::filesystem::copy_file(shard_file_name(other, 2, 3), file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  dist::world()->barrier()->wait();
  Trainer run(1, sgd(), dist::world());
  expect_error([&] { run.load(dir); }, "'" + file + "' was written by another save");
}

TEST(ShardedCheckpointErrors, AFileDisagreeingWithTheIndexIsNamed) {
  const std::string dir = saved_checkpoint("disagree");
  const std::string file = shard_file_name(dir, 0, 3);
  if (dist::world()->rank() == 0) {
    // Same save (same id), but its parameters cut short by one element.
    SafetensorsFile f = load_safetensors(file);
    const Tensor p = f.tensors.at("vector.0.param");
    f.tensors.set("vector.0.param", p.narrow(0, 0, p.numel() - 1).clone());
    save_safetensors(file, f.tensors, f.metadata);
  }
  dist::world()->barrier()->wait();
  Trainer run(1, sgd(), dist::world());
  expect_error([&] { run.load(dir); },
               "'" + file + "': 'vector.0.param' is f64 [40] but the index says this file holds "
               "elements [0, 41) of vector 0");
}

TEST(ShardedCheckpointErrors, AModelOfAnotherShapeOrDtypeIsNamed) {
  const std::string dir = saved_checkpoint("layout");
  auto world = dist::world();
  {
    manual_seed(1);
    auto other = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(8, 6), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(6, 5), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(5, 3)});
    other->to(kF64);
    expect_error([&] { load_sharded_checkpoint(dir, *other, nullptr); },
                 "parameter '0.weight' is f64 [7, 8] but the model's is f64 [6, 8]");
  }
  {
    auto f32 = mlp(31, kF32);
    expect_error([&] { load_sharded_checkpoint(dir, *f32, nullptr); },
                 "parameter '0.weight' is f64 [7, 8] but the model's is f32 [7, 8]");
  }
}

TEST(ShardedCheckpointErrors, NoOptimizerStateIsAnError) {
  auto world = dist::world();
  const std::string dir = scratch("no_optimizer");
  Trainer writer(3, sgd(), world);
  save_sharded_checkpoint(dir, *writer.fsdp, nullptr, TrainingProgress{});
  Trainer reader(3, sgd(), world);
  expect_error([&] { reader.load(dir); }, "holds no optimizer state");
}

TEST(ShardedCheckpointErrors, OneRankFailingToWriteStopsEveryRank) {
  auto world = dist::world();
  const std::string dir = scratch("write_fails");
  // Rank 2's file cannot be created: a directory holds its name.
  if (world->rank() == 0) std::filesystem::create_directories(shard_file_name(dir, 2, 3));
  world->barrier()->wait();
  Trainer run(1, sgd(), world);
  run.train(0, 1);
  expect_error([&] { run.save(dir, 1); },
               world->rank() == 2 ? shard_file_name(dir, 2, 3) : "rank 2 failed");
  EXPECT_FALSE(std::filesystem::exists(index_file_name(dir)));
}


// ---- Content hashes (issue 49) ----------------------------------------------------------------

void flip_bit(const std::string& path, uint64_t at, int bit) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  char byte;
  f.seekg(static_cast<std::streamoff>(at));
  f.read(&byte, 1);
  byte ^= static_cast<char>(1 << bit);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&byte, 1);
}

// A bit of `name`'s data in `path` flipped (by rank 0), then loaded on every rank: refused,
// every rank naming the file and the tensor (every rank reads every parameter).
TEST(ShardedCheckpointErrors, AFlippedBitInAShardIsRefusedNamingFileAndTensor) {
  const std::string dir = saved_checkpoint("flip_shard");
  const std::string file = shard_file_name(dir, 1, 3);
  if (dist::world()->rank() == 0) {
    const SafetensorsHeader h = read_safetensors_header(file);
    const SafetensorsHeader::Entry* e = h.find("vector.0.param");
    ASSERT_NE(e, nullptr);
    flip_bit(file, h.data_start + e->begin + 17, 3);
  }
  dist::world()->barrier()->wait();
  Trainer run(1, sgd(), dist::world());
  expect_error([&] { run.load(dir); }, "'" + file + "'");
  expect_error([&] { run.load(dir); }, "tensor 'vector.0.param'");
}

TEST(ShardedCheckpointErrors, AFlippedBitInTheIndexIsRefusedNamingFileAndTensor) {
  const std::string dir = saved_checkpoint("flip_index");
  const std::string index = index_file_name(dir);
  if (dist::world()->rank() == 0) {
    const SafetensorsHeader h = read_safetensors_header(index);
    const SafetensorsHeader::Entry* e = h.find("progress");
    ASSERT_NE(e, nullptr);
    flip_bit(index, h.data_start + e->begin + 8, 1);  // the step: 1 -> 3
  }
  dist::world()->barrier()->wait();
  Trainer run(1, sgd(), dist::world());
  expect_error([&] { run.load(dir); }, "'" + index + "'");
  expect_error([&] { run.load(dir); }, "tensor 'progress'");
}

// 60 seeded single-bit flips anywhere in the files of a small sharded checkpoint (the index and
// the three shards: headers, metadata, padding and data alike), each loaded by one process
// into a plain model and optimizer (which reads every byte it needs of every file): none is
// accepted. (Before the hashes, 11 of 60 such checkpoints loaded.)
TEST(ShardedCheckpointErrors, SixtySingleBitFlipsAreAllRefused) {
  const std::string dir = saved_checkpoint("mutations");
  if (dist::world()->rank() == 0) {
    std::vector<std::string> files{index_file_name(dir)};
    for (int r = 0; r < 3; ++r) files.push_back(shard_file_name(dir, r, 3));
    std::vector<uint64_t> sizes;
    uint64_t total = 0;
    for (const std::string& f : files) {
      sizes.push_back(std::filesystem::file_size(f));
      total += sizes.back();
    }
    {
      Trainer clean(0, sgd(), nullptr, 77);
      ASSERT_NO_THROW(clean.load(dir));
    }
    std::mt19937_64 random(49);
    int accepted = 0;
    std::string accepted_at;
    for (int i = 0; i < 60; ++i) {
      uint64_t at = random() % total;
      const int bit = static_cast<int>(random() % 8);
      size_t f = 0;
      while (at >= sizes[f]) at -= sizes[f++];
      flip_bit(files[f], at, bit);
      Trainer run(0, sgd(), nullptr, 77);
      try {
        run.load(dir);
        ++accepted;
        accepted_at += " " + files[f].substr(dir.size() + 1) + "@" + std::to_string(at);
      } catch (const Error&) {
      }
      flip_bit(files[f], at, bit);  // restored
    }
    EXPECT_EQ(accepted, 0) << "accepted:" << accepted_at;
  }
  dist::world()->barrier()->wait();
}

}  // namespace
}  // namespace zero
}  // namespace dist
}  // namespace tessera
