// Stored per-layer profiles (cost/stored_profile.h): a file read back as written, applied to a
// model's profile (scaled to the batch, the overhead only where batch and optimizer agree), a
// file that no longer fits its model refused naming the layer, and every file compiled in fits
// the model it names.
#include "cost/stored_profile.h"

#include <gtest/gtest.h>

#include "tests/util/expect_error.h"

namespace tessera {
namespace cost {
namespace {

using testing::expect_error;

StoredProfile mlp_profile() {
  StoredProfile s;
  s.path = "cost/profiles/mlp-fashion-mnist.json";
  s.model = "mlp";
  s.data = "fashion-mnist";
  s.batch = 64;
  s.optimizer = "adam";
  s.repeats = 7;
  s.machine = "Test CPU (2 cores)";
  s.date = "2026-01-02";
  s.command = "explain profile --model=mlp";
  s.step_overhead_seconds = 0.25e-3;
  s.layers = {{"flatten", 0.01e-3}, {"fc1", 0.8e-3}, {"relu", 0.03e-3}, {"fc2", 0.05e-3}};
  return s;
}

ModelProfile mlp_model(int64_t batch) {
  const ModelInput in;
  auto model = build_model("mlp", in);
  return describe_model("mlp", *model, in, batch);
}

TEST(StoredProfile, ReadsBackWhatItWrites) {
  const StoredProfile s = mlp_profile();
  const std::string text = stored_profile_json(s);
  const StoredProfile r = parse_stored_profile(text, s.path);
  EXPECT_EQ(r.model, "mlp");
  EXPECT_EQ(r.data, "fashion-mnist");
  EXPECT_EQ(r.batch, 64);
  EXPECT_EQ(r.optimizer, "adam");
  EXPECT_EQ(r.repeats, 7);
  EXPECT_EQ(r.machine, s.machine);
  EXPECT_EQ(r.date, s.date);
  EXPECT_EQ(r.command, s.command);
  EXPECT_DOUBLE_EQ(r.step_overhead_seconds, 0.25e-3);
  ASSERT_EQ(r.layers.size(), 4u);
  EXPECT_EQ(r.layers[1].first, "fc1");
  EXPECT_DOUBLE_EQ(r.layers[1].second, 0.8e-3);
  EXPECT_EQ(stored_profile_json(r), text);  // written again, the same bytes
  EXPECT_NE(text.find("  {\"name\":\"fc1\",\"seconds\":0.0008}"), std::string::npos) << text;
}

TEST(StoredProfile, AppliesAtItsBatchWithTheOverhead) {
  ModelProfile p = mlp_model(64);
  apply_stored_profile(mlp_profile(), OptimizerKind::kAdam, &p);
  EXPECT_DOUBLE_EQ(p.compute_seconds(), 0.89e-3);
  EXPECT_DOUBLE_EQ(p.layers[1].forward_seconds, 0.8e-3 / 3);
  EXPECT_DOUBLE_EQ(p.layers[1].backward_seconds, 0.8e-3 * 2 / 3);
  EXPECT_DOUBLE_EQ(p.step_overhead_seconds, 0.25e-3);
  EXPECT_EQ(p.times_source, "stored profile cost/profiles/mlp-fashion-mnist.json, measured on "
                            "Test CPU (2 cores) on 2026-01-02 at batch 64");
}

TEST(StoredProfile, ScalesToAnotherBatchWithoutTheOverhead) {
  ModelProfile p = mlp_model(16);
  apply_stored_profile(mlp_profile(), OptimizerKind::kAdam, &p);
  EXPECT_DOUBLE_EQ(p.compute_seconds(), 0.89e-3 / 4);
  EXPECT_EQ(p.step_overhead_seconds, 0);  // measured with another batch: not this step's
  EXPECT_NE(p.times_source.find("at batch 64, scaled to batch 16"), std::string::npos) << p.times_source;
  ModelProfile sgd = mlp_model(64);
  apply_stored_profile(mlp_profile(), OptimizerKind::kSGD, &sgd);
  EXPECT_EQ(sgd.step_overhead_seconds, 0);  // Adam's step is not SGD's
  EXPECT_DOUBLE_EQ(sgd.compute_seconds(), 0.89e-3);
}

TEST(StoredProfile, RefusesAFileThatNoLongerFitsTheModel) {
  StoredProfile renamed = mlp_profile();
  renamed.layers[3].first = "head";
  ModelProfile p = mlp_model(64);
  expect_error([&] { apply_stored_profile(renamed, OptimizerKind::kAdam, &p); },
               "cost/profiles/mlp-fashion-mnist.json: layer 3 is head, but mlp's is fc2 (the model "
               "changed since 2026-01-02: measure it again, explain profile)");
  StoredProfile short_one = mlp_profile();
  short_one.layers.pop_back();
  expect_error([&] { apply_stored_profile(short_one, OptimizerKind::kAdam, &p); },
               "cost/profiles/mlp-fashion-mnist.json: 3 layers, but mlp has 4");
}

TEST(StoredProfile, BadFilesAreNamed) {
  expect_error([] { parse_stored_profile("{\"model\": ", "cost/profiles/x.json"); },
               "cost/profiles/x.json: not JSON");
  std::string text = stored_profile_json(mlp_profile());
  const std::string no_batch = text.replace(text.find("\"batch\""), 7, "\"batches\"");
  expect_error([&] { parse_stored_profile(no_batch, "cost/profiles/x.json"); },
               "cost/profiles/x.json: no \"batch\"");
  std::string wrong = stored_profile_json(mlp_profile());
  wrong.replace(wrong.find("\"Test CPU (2 cores)\""), 20, "12");
  expect_error([&] { parse_stored_profile(wrong, "cost/profiles/x.json"); },
               "cost/profiles/x.json: \"machine\" is 12, not the expected kind");
}

TEST(StoredProfile, PathsNameModelAndInput) {
  EXPECT_EQ(stored_profile_path("mlp", ModelInput{}), "cost/profiles/mlp-fashion-mnist.json");
  EXPECT_EQ(stored_profile_path("resnet50", parse_model_input("imagenet")),
            "cost/profiles/resnet50-imagenet.json");
  EXPECT_EQ(stored_profile_path("gpt-tiny", parse_model_input("text")), "cost/profiles/gpt-tiny-text.json");
  ModelInput bytes = parse_model_input("text");
  bytes.seq_len = 32;
  bytes.vocab = 256;
  EXPECT_EQ(stored_profile_path("gpt-tiny", bytes), "cost/profiles/gpt-tiny-text-s32-v256.json");
}

// Every profile compiled in: at the path its name says, found for its own input and for no
// other, and fitting the model as the catalog builds it today.
TEST(StoredProfile, EveryStoredFileFitsItsModel) {
  ASSERT_GE(stored_profiles().size(), 2u);
  for (const StoredProfile& s : stored_profiles()) {
    SCOPED_TRACE(s.path);
    ModelInput in = parse_model_input(s.data);
    in.seq_len = s.seq_len;
    in.vocab = s.vocab;
    in.context = s.context;
    EXPECT_EQ(stored_profile_path(s.model, in), s.path);
    EXPECT_EQ(find_stored_profile(s.model, in), &s);
    EXPECT_FALSE(s.machine.empty());
    EXPECT_EQ(s.date.size(), 10u);
    auto model = build_model(s.model, in);
    ModelProfile p = describe_model(s.model, *model, in, s.batch);
    apply_stored_profile(s, s.optimizer == "sgd" ? OptimizerKind::kSGD : OptimizerKind::kAdam, &p);
    EXPECT_GT(p.compute_seconds(), 0);
  }
  EXPECT_EQ(find_stored_profile("mlp", parse_model_input("imagenet")), nullptr);
  EXPECT_NE(find_stored_profile("mlp", ModelInput{}), nullptr);
}

}  // namespace
}  // namespace cost
}  // namespace tessera
