// What wrote a checkpoint (tools/train/checkpoint_origin.h): the strings a run writes, read back
// from a real checkpoint file, and the resume into another model or optimizer refused with both
// named; checkpoints from before the strings are compared on what they say.
#include "tools/train/checkpoint_origin.h"

#include <gtest/gtest.h>

#include "dist/checkpoint.h"
#include "tests/tools/flag_lines.h"
#include "tests/util/test_util.h"

namespace tessera {
namespace train {
namespace {

// The FlagError of resuming `path` (its strings `written`) with `line`'s flags, or "(no error)".
std::string refusal(const Metadata& written, const std::string& line) {
  try {
    check_checkpoint_origin(written, read(line), "ck/step-00000030/checkpoint.safetensors", "ck");
  } catch (const FlagError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CheckpointOrigin, ARunWritesItsModelAndOptimizer) {
  EXPECT_EQ(checkpoint_origin(read("--model=mlp --optimizer=adamw")),
            (Metadata{{"model", "mlp"}, {"model_flags", "--model=mlp"}, {"optimizer", "adamw"}}));
  // The model's default optimizer, as resolved.
  EXPECT_EQ(checkpoint_origin(read("--model=resnet20")).at("optimizer"), "sgd");
  EXPECT_EQ(model_flags(read("--model=logistic --data=synthetic --num-classes=4")),
            "--model=logistic --num-classes=4");
  // A GPT's shape as resolved: the named config's, with the flags given over it.
  EXPECT_EQ(model_flags(read("--model=gpt-tiny --n-layer=3")),
            "--model=gpt-tiny --context=64 --n-layer=3 --n-head=2 --n-embd=32");
}

TEST(CheckpointOrigin, AnotherModelOrOptimizerIsRefusedNamingBoth) {
  const Metadata mlp_adamw = checkpoint_origin(read("--model=mlp --optimizer=adamw"));
  EXPECT_EQ(refusal(mlp_adamw, "--model=mlp --optimizer=adamw"), "(no error)");
  EXPECT_EQ(refusal(mlp_adamw, "--model=mlp --optimizer=adamw --strategy=zero1 --lr=0.5"),
            "(no error)");  // the strategy and the other settings may change
  EXPECT_EQ(refusal(mlp_adamw, "--model=resnet20 --optimizer=sgd"),
            "--resume=ck: ck/step-00000030/checkpoint.safetensors was written by --model=mlp "
            "--optimizer=adamw; this run is --model=resnet20 --optimizer=sgd (resume with the "
            "same model and optimizer, or start afresh without --resume)");
  EXPECT_NE(refusal(mlp_adamw, "--model=mlp --optimizer=sgd")
                .find("written by --model=mlp --optimizer=adamw; this run is --model=mlp "
                      "--optimizer=sgd"),
            std::string::npos);
  const Metadata tiny = checkpoint_origin(read("--model=gpt-tiny"));
  EXPECT_NE(refusal(tiny, "--model=gpt-tiny --n-embd=64")
                .find("written by --model=gpt-tiny --context=64 --n-layer=2 --n-head=2 "
                      "--n-embd=32 --optimizer=adamw; this run is --model=gpt-tiny --context=64 "
                      "--n-layer=2 --n-head=2 --n-embd=64 --optimizer=adamw"),
            std::string::npos);
}

TEST(CheckpointOrigin, OlderCheckpointsAreComparedOnWhatTheySay) {
  // The train tool's checkpoints before the optimizer was written: the model's name alone.
  EXPECT_EQ(refusal({{"model", "mlp"}}, "--model=mlp --optimizer=sgd"), "(no error)");
  EXPECT_NE(refusal({{"model", "mlp"}}, "--model=logistic").find(
                "was written by --model=mlp; this run is --model=logistic ("),
            std::string::npos);
  // A user's own program's: nothing to compare.
  EXPECT_EQ(refusal({}, "--model=logistic"), "(no error)");
  EXPECT_NE(refusal({{"optimizer", "adam"}}, "--model=logistic --optimizer=sgd")
                .find("was written by --optimizer=adam; this run is --optimizer=sgd ("),
            std::string::npos);
}

TEST(CheckpointOrigin, TheStringsAreReadBackFromTheCheckpointWithoutItsTensors) {
  const std::string path = testing::temp_path("origin.safetensors");
  const Metadata origin = checkpoint_origin(read("--model=mlp --optimizer=adamw"));
  save_checkpoint(path, StateDict{}, nullptr, TrainingProgress{}, origin);
  const Metadata back = read_checkpoint_strings(path);
  for (const auto& [key, value] : origin) EXPECT_EQ(back.at(key), value) << key;
}

}  // namespace
}  // namespace train
}  // namespace tessera
