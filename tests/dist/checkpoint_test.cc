// Checkpoints: model + optimizer + progress round trip, resuming continues exactly, and
// corrupted or foreign files are rejected, as are tensors relabelled with a dtype of another
// kind than the model or optimizer holds (the bytes would load as garbage).
#include "dist/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "autograd/functions.h"
#include "models/simple.h"
#include "optim/adam.h"
#include "tensor/ops.h"
#include "tests/util/expect_error.h"
#include "tests/util/relabel.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace {

using tessera::testing::expect_error;
using tessera::testing::relabel;
using tessera::testing::temp_path;

// One Adam step of an MLP on a fixed batch.
void train_step(nn::Sequential& model, optim::Optimizer& opt, int seed) {
  Generator g(seed);
  const Tensor x = randn({8, 1, 28, 28}, {}, &g);
  const Tensor y = arange(8, kI64);
  opt.zero_grad();
  cross_entropy(model.forward(Variable(x)), y).backward();
  opt.step();
}

TEST(Checkpoint, ResumingContinuesExactly) {
  manual_seed(1);
  auto model = models::MLP(784, 32, 10);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  for (int s = 0; s < 3; ++s) train_step(*model, opt, s);
  TrainingProgress progress{2, 3, default_generator().state()};
  save_checkpoint(temp_path("ckpt.safetensors"), *model, &opt, progress, {{"model", "mlp"}});
  for (int s = 3; s < 5; ++s) train_step(*model, opt, s);

  manual_seed(99);  // a different start: everything must come from the checkpoint
  auto resumed = models::MLP(784, 32, 10);
  optim::Adam opt2(resumed->parameters(), optim::AdamOptions(0.5));
  Metadata meta;
  const TrainingProgress back = load_checkpoint(temp_path("ckpt.safetensors"), *resumed, &opt2, &meta);
  EXPECT_EQ(back.epoch, 2);
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.rng.seed, progress.rng.seed);
  EXPECT_EQ(back.rng.offset, progress.rng.offset);
  EXPECT_EQ(meta.at("model"), "mlp");
  for (int s = 3; s < 5; ++s) train_step(*resumed, opt2, s);
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    EXPECT_EQ(max_abs_diff(model->parameters()[i].data(), resumed->parameters()[i].data()), 0);
  }
}

TEST(Checkpoint, RejectsCorruptedAndForeignFiles) {
  auto model = models::LogisticRegression();
  save_checkpoint(temp_path("c.safetensors"), *model, nullptr, {});
  std::ifstream in(temp_path("c.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(temp_path("cut.safetensors"), std::ios::binary).write(bytes.data(), bytes.size() - 100);
  EXPECT_THROW(load_checkpoint(temp_path("cut.safetensors"), *model, nullptr), Error);
  // A checkpoint without optimizer state cannot restore one.
  optim::Adam opt(model->parameters(), optim::AdamOptions());
  EXPECT_THROW(load_checkpoint(temp_path("c.safetensors"), *model, &opt), Error);
  // Weights of another architecture fail the strict load.
  auto other = models::MLP();
  EXPECT_THROW(load_checkpoint(temp_path("c.safetensors"), *other, nullptr), Error);
  // A plain safetensors file is not a checkpoint.
  save_safetensors(temp_path("plain.safetensors"), model->state_dict());
  EXPECT_THROW(load_checkpoint(temp_path("plain.safetensors"), *model, nullptr), Error);
}

// Issue 49: a flipped bit inside a tensor of a full checkpoint (fc1.weight, as tried) is
// refused with an error naming the file and the tensor, not loaded as a slightly different model.
TEST(Checkpoint, AFlippedBitInATensorIsRefusedNamingFileAndTensor) {
  manual_seed(1);
  auto model = models::MLP(784, 32, 10);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  train_step(*model, opt, 0);
  const std::string path = temp_path("flip.safetensors");
  save_checkpoint(path, *model, &opt, TrainingProgress{1, 1, default_generator().state()});
  const SafetensorsHeader h = read_safetensors_header(path);
  for (const char* name : {"model.fc1.weight", "optimizer.state.0.exp_avg"}) {
    const SafetensorsHeader::Entry* e = h.find(name);
    ASSERT_NE(e, nullptr) << name;
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    const std::streamoff at = static_cast<std::streamoff>(h.data_start + e->begin + 1001);
    char byte;
    f.seekg(at);
    f.read(&byte, 1);
    byte ^= 0x04;
    f.seekp(at);
    f.write(&byte, 1);
    f.close();
    expect_error([&] { read_checkpoint(path); }, "'" + path + "'");
    expect_error([&] { read_checkpoint(path); }, "tensor '" + std::string(name) + "'");
    byte ^= 0x04;  // restored: the next flip is the only one
    std::fstream g(path, std::ios::binary | std::ios::in | std::ios::out);
    g.seekp(at);
    g.write(&byte, 1);
  }
  EXPECT_NO_THROW(read_checkpoint(path));
}

TEST(Checkpoint, DtypesOfAnotherKindNameTheFileAndTensor) {
  manual_seed(1);
  auto model = models::MLP(784, 32, 10);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  train_step(*model, opt, 0);
  const std::string good = temp_path("kinds.safetensors");
  save_checkpoint(good, *model, &opt, {1, 1, default_generator().state()});
  const std::string weight = model->state_dict().items()[0].first;
  const std::string bad = temp_path("relabelled.safetensors");
  // A relabelled checkpoint fails its header's hash first.
  relabel(good, bad, "model." + weight, "I32");
  expect_error([&] { read_checkpoint(bad); }, "the header fails its crc32 check");
  // The dtype checks, on the same checkpoint without hashes (written before them, or by a tool
  // that rewrote it).
  const std::string unhashed = temp_path("kinds_unhashed.safetensors");
  {
    const SafetensorsFile f = load_safetensors(good);
    save_safetensors(unhashed, f.tensors, f.metadata);
    EXPECT_FALSE(read_checkpoint(unhashed).hashed);
    EXPECT_TRUE(read_checkpoint(good).hashed);
  }

  // An f32 weight relabelled i32: the same bytes used to load as integers converted to float.
  relabel(unhashed, bad, "model." + weight, "I32");
  auto fresh = models::MLP(784, 32, 10);
  const Tensor before = fresh->state_dict().items()[0].second.clone();
  expect_error([&] { load_checkpoint(bad, *fresh, nullptr); }, "relabelled.safetensors");
  expect_error([&] { load_checkpoint(bad, *fresh, nullptr); },
               "'model." + weight + "' is i32, but the model's '" + weight + "' is f32");
  EXPECT_EQ(max_abs_diff(fresh->state_dict().items()[0].second, before), 0);  // untouched
  // The same through read_checkpoint, as the train tool restores.
  expect_error([&] { load_model_state(read_checkpoint(bad), *fresh); }, "'model." + weight + "'");

  // Optimizer state: f32 moments relabelled i32, the i64 step relabelled f64.
  optim::Adam opt2(fresh->parameters(), optim::AdamOptions(0.5));
  relabel(unhashed, bad, "optimizer.state.0.exp_avg", "I32");
  expect_error([&] { load_checkpoint(bad, *fresh, &opt2); }, "relabelled.safetensors");
  expect_error([&] { load_checkpoint(bad, *fresh, &opt2); },
               "(tensors 'optimizer.*'): Optimizer::load_state_dict: 'state.0.exp_avg' is a i32 "
               "tensor, expected a floating-point one");
  relabel(unhashed, bad, "optimizer.state.0.step", "F64");
  expect_error([&] { load_optimizer_state(read_checkpoint(bad), opt2); },
               "'state.0.step' is a f64 tensor of shape [], expected a one-element integer tensor");
  EXPECT_EQ(opt2.param_groups()[0].options->lr(), 0.5);  // untouched
  // The unaltered file loads.
  load_checkpoint(good, *fresh, &opt2);
  EXPECT_EQ(opt2.param_groups()[0].options->lr(), 1e-2);
}

// A run's checkpoint directory (issue 49): a step directory counts once its commit file is in
// place; an uncommitted one is ignored and removed at the next save; a step committed already
// is not overwritten (a serial is added); two committed ones are kept; the layout before is read
// after every committed directory.
TEST(CheckpointDirectory, CommittedCheckpointsNewestFirst) {
  namespace fs = std::filesystem;
  const std::string dir = temp_path("run_dir");
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto model = models::LogisticRegression();
  const auto save_full = [&](int64_t step) {
    const std::string d = checkpoint_save_dir(dir, step, begin_checkpoint_save(dir, step));
    save_checkpoint(d + "/" + kCheckpointFile, *model, nullptr, {1, step, {}});
    return d;
  };
  EXPECT_TRUE(committed_checkpoints(dir).empty());
  save_checkpoint(dir + "/last.safetensors", *model, nullptr, {1, 99, {}});  // the layout before
  const std::string a = save_full(10);
  fs::create_directories(dir + "/step-00000020");  // a save killed before its commit
  { std::ofstream(dir + "/step-00000020/shard-00001-of-00002.safetensors") << "partial"; }
  fs::create_directories(dir + "/step-00000030");  // a sharded one, committed by its index
  { std::ofstream(dir + "/step-00000030/" + kIndexFile) << "index"; }
  std::vector<CommittedCheckpoint> c = committed_checkpoints(dir);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].path, dir + "/step-00000030");
  EXPECT_EQ(c[0].step, 30);
  EXPECT_EQ(c[1].path, a + "/" + kCheckpointFile);
  EXPECT_EQ(c[2].path, dir + "/last.safetensors");
  EXPECT_EQ(c[2].step, -1);
  EXPECT_EQ(checkpoint_at(a), a + "/" + kCheckpointFile);
  EXPECT_EQ(checkpoint_at(dir + "/step-00000030"), dir + "/step-00000030");
  EXPECT_FALSE(checkpoint_at(dir + "/step-00000020").has_value());
  EXPECT_FALSE(checkpoint_at(dir).has_value());  // a run's directory, not one checkpoint

  // Step 30 again (a run resumed from an older checkpoint): a directory of its own; the
  // uncommitted step 20 is gone.
  const std::string again = save_full(30);
  EXPECT_EQ(again, dir + "/step-00000030.1");
  EXPECT_FALSE(fs::exists(dir + "/step-00000020"));
  EXPECT_EQ(committed_checkpoints(dir)[0].path, again + "/" + kCheckpointFile);
  remove_old_checkpoints(dir);  // keeps the two newest: 30.1 and 30
  c = committed_checkpoints(dir);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1].path, dir + "/step-00000030");
  EXPECT_FALSE(fs::exists(a));
  EXPECT_TRUE(fs::exists(dir + "/last.safetensors"));  // the layout before is left alone
}

}  // namespace
}  // namespace tessera
