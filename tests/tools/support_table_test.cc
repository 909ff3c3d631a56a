// The support table (tools/train/support_table.h) alone: docs/COMPOSITION.md is its output, the
// flag checker refuses every combination it refuses (each value of each condition) with its
// reason and names the flags as given (tools/launch its refusals of restarts), and each axis's
// flags give the value it reads back.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "tests/tools/flag_lines.h"
#include "tensor/check.h"
#include "tools/launch/command.h"
#include "tools/train/support_table.h"

namespace tessera {
namespace train {
namespace {

// The flags giving `axis` the value `value` (with what it needs to mean something: a
// checkpoint directory, a resume path).
std::string flags_for(const std::string& axis, const std::string& value) {
  std::string f = support_axis(axis).flags_for(value);
  if (axis == "checkpoint" && value != "none") f += " --checkpoint-dir=/tmp/x";
  if (axis == "resume" && value == "yes") f += " --resume=/tmp/x";
  return f;
}

// The refusal `flags` meet: the train tool's flag checker's, or for a restart (not a flag of
// the train tool) tools/launch's, which checks its command's flags with the restart.
std::string refusal_of(const std::string& flags, const std::string& restart) {
  if (restart.empty() || restart == "none") return error_of(flags);
  std::vector<std::string> command = {"mpirun", "-np", "4", "train"};
  std::istringstream words(flags);
  for (std::string w; words >> w;) command.push_back(w);
  try {
    const launch::LaunchCommand launcher(command);  // checks a restart on the same ranks
    launcher.check_restart(restart);
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

TEST(SupportTable, CompositionPageIsTheTablesOutput) {
  std::ifstream in(std::string(getenv("TEST_SRCDIR")) + "/tessera/docs/COMPOSITION.md");
  ASSERT_TRUE(in.good()) << "docs/COMPOSITION.md not found in the test's runfiles";
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_TRUE(page.str() == composition_markdown())
      << "docs/COMPOSITION.md is not the support table's output: run\n"
         "  bazel-bin/tools/train --support-table > docs/COMPOSITION.md";
}

// Every combination of the values a refusal names is refused by the flag checker with the
// refusal's reason (under a strategy no earlier refusal also refuses, when it names none).
TEST(SupportTable, TheFlagCheckerRefusesEveryRefusedCombination) {
  int checked = 0;
  for (const Refusal& r : support_refusals()) {
    std::function<void(size_t, Assignment)> each = [&](size_t k, Assignment values) {
      if (k < r.when.size()) {
        for (const std::string& v : r.when[k].values) {
          Assignment with = values;
          with.emplace_back(r.when[k].axis, v);
          each(k + 1, with);
        }
        return;
      }
      if (value_in(values, "strategy").empty()) {
        for (const std::string& s : strategy_axis().values) {
          Assignment with = values;
          with.emplace_back("strategy", s);
          if (refusal_for(with) == &r) {
            values = with;
            break;
          }
        }
      }
      // A restart needs a checkpoint directory (refusal 22 names it where it matters).
      const std::string restart = value_in(values, "restart");
      if (!restart.empty() && restart != "none" && value_in(values, "checkpoint").empty()) {
        values.emplace_back("checkpoint", "full");
      }
      std::string flags;
      for (const auto& [axis, value] : values) flags += " " + flags_for(axis, value);
      // Its reason, or that of another refusal matching it too (async x sharded: two).
      const std::string error = refusal_of(flags, value_in(values, "restart"));
      bool named = false;
      for (const Refusal& other : support_refusals()) {
        named = named || (matches(other, values) && error.find(other.why) != std::string::npos);
      }
      EXPECT_TRUE(named && (error.find(r.why) != std::string::npos || &r != refusal_for(values)))
          << flags << "\ngave: " << error;
      ++checked;
    };
    each(0, {});
  }
  EXPECT_GT(checked, 100);
}

TEST(SupportTable, MessagesNameTheFlagsAsGiven) {
  EXPECT_EQ(error_of("--strategy=zero1 --compression=fp16 --amp=fp16"),
            "--strategy=zero1 with --compression=fp16 and --amp=fp16: ZeRO-1 reduce-scatters in "
            "step(), after the loss scaler has unscaled the gradients, so fp16's range loses the "
            "small ones (ZeRO-2 sends them scaled, during backward): use --strategy=zero2 or "
            "--compression=bf16");
  EXPECT_EQ(error_of("--strategy=ddp --compression=topk:0.05 --param-dtype=f16")
                .rfind("--compression=topk:0.05 with --param-dtype=f16 and --strategy=ddp: DDP's "
                       "compressors read and write f32 gradient buckets", 0),
            0u);
  EXPECT_EQ(error_of("--strategy=zero2 --compression=bf16 --error-feedback=true")
                .rfind("--strategy=zero2 with --compression=bf16 and --error-feedback=true: ", 0),
            0u);
  EXPECT_EQ(error_of("--strategy=gossip --param-dtype=f16 --model=resnet20")
                .rfind("--strategy=gossip with --param-dtype=f16: the optimizer steps an f32 "
                       "master copy", 0),
            0u);
  EXPECT_EQ(error_of("--strategy=zero1 --compression=fp16 --param-dtype=f16")
                .rfind("--strategy=zero1 with --compression=fp16 and --param-dtype=f16: ZeRO-1 "
                       "reduce-scatters in step()", 0),
            0u);
  // The checkpoint axis as given: a format without a directory is still that format.
  EXPECT_EQ(error_of("--strategy=ddp --checkpoint-format=sharded")
                .rfind("--checkpoint-format=sharded with --strategy=ddp: the sharded format", 0),
            0u);
  // What the table allows passes.
  EXPECT_EQ(error_of("--strategy=zero2 --compression=fp16 --amp=fp16"), "(no error)");
  EXPECT_EQ(error_of("--strategy=pipeline --dp-strategy=zero2 --pipeline-schedule=zb-h1 "
                     "--model=mlp"), "(no error)");
  EXPECT_EQ(error_of("--strategy=pipeline --dp-strategy=zero2 --pipeline-schedule=zb-h2 "
                     "--model=resnet20"), "(no error)");
  EXPECT_EQ(error_of("--strategy=ddp --compression=topk:0.05 --amp=bf16"), "(no error)");
}

// Each axis's flags give the value it reads back, where the axis applies.
TEST(SupportTable, EachAxisReadsBackTheValueItsFlagsGive) {
  for (const Axis& axis : support_axes()) {
    for (const std::string& value : axis.values) {
      // A strategy under which the axis applies, and a compressor for error feedback.
      std::string context = axis.name == "pipeline-schedule" || axis.name == "dp-strategy"
                                ? "--strategy=pipeline"
                                : axis.name == "strategy" ? "" : "--strategy=ddp";
      if (axis.name == "error-feedback") context += " --compression=topk:0.1";
      if (axis.name == "weight-decay-groups" || axis.name == "recompute") {
        context += " --model=gpt-tiny";
      }
      if (axis.name == "context-parallel") context += " --model=gpt-tiny --seq-len=16";
      if (axis.name == "context-parallel-algorithm") {
        context += " --model=gpt-tiny --seq-len=16 --context-parallel=2";
      }
      if (axis.name == "sequence-parallel") context += " --model=gpt-tiny --tensor-parallel=2";
      if (axis.name == "checkpoint" && value == "sharded") context = "--strategy=zero1";
      if (axis.name == "offload") context = value == "all" ? "--strategy=zero3" : "--strategy=zero2";
      Config c = read(context + " " + flags_for(axis.name, value));
      if (axis.name == "restart") c.restart = value;  // tools/launch's, not a flag
      EXPECT_EQ(axis.value_of(c), value) << axis.name;
    }
  }
}

}  // namespace
}  // namespace train
}  // namespace tessera
