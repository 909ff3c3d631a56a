// The train tool's flag table (tools/train/flag_table.h) alone: every row reaches its Config
// field, --help and the settings the ranks compare; a flag given with a strategy its row does
// not list, an unknown flag and a bad value are refused naming what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tools/flag_lines.h"
#include "tools/train/flag_rules.h"
#include "tools/train/flag_table.h"

namespace tessera {
namespace train {
namespace {

std::vector<const Flag*> table() {
  std::vector<const Flag*> flags;
  for (const FlagSection& s : flag_sections()) {
    for (const Flag& f : s.flags) flags.push_back(&f);
  }
  return flags;
}

// For every flag, a value other than its default and the flags that value needs beside it.
// Literal on purpose: a row added to the table without a line here fails EveryRowHasAnExample.
struct Example {
  const char* flag;
  const char* value;
  const char* with;
  const char* also_changes = "";  // a setting whose default follows this flag
};
const Example kExamples[] = {
    {"model", "mlp", "", "epochs"},
    {"strategy", "ddp", ""},
    {"data", "synthetic", ""},
    {"data-dir", "/tmp/fm", ""},
    {"train-limit", "100", ""},
    {"synthetic-size", "64", ""},
    {"tokenizer", "byte", "--model=gpt-tiny"},
    {"seq-len", "32", "--model=gpt-tiny"},
    {"context", "128", "--model=gpt-tiny"},
    {"recompute", "full", "--model=gpt-tiny"},
    {"recompute-modules", "core_attn,gelu", "--model=gpt-tiny --recompute=selective"},
    {"val-limit", "8", "--model=gpt-tiny"},
    {"eval-every", "4", "--model=gpt-tiny"},
    {"sample", "10", "--model=gpt-tiny"},
    {"device", "cuda:1", ""},
    {"threads", "3", ""},
    {"seed", "7", ""},
    {"epochs", "3", ""},
    {"batch-size", "16", ""},
    {"lr", "0.5", ""},
    {"optimizer", "adamw", "", "weight-decay"},
    {"momentum", "0.5", ""},
    {"weight-decay", "0.25", ""},
    {"clip-grad-norm", "1", ""},
    {"schedule", "step", ""},
    {"warmup-epochs", "1", ""},
    {"label-smoothing", "0.1", ""},
    {"augment", "true", ""},
    {"checkpoint-dir", "/tmp/ckpt", ""},
    {"checkpoint-format", "sharded", "--strategy=zero1"},
    {"resume", "/tmp/ckpt", ""},
    {"save-model", "/tmp/model.safetensors", ""},
    {"metrics", "/tmp/m.jsonl", ""},
    {"trace", "/tmp/t.json", ""},
    {"report", "/tmp/r.html", ""},
    {"trace-steps", "2:3", "--trace=/tmp/t.json"},
    {"amp", "bf16", ""},
    {"param-dtype", "bf16", ""},
    {"memory-format", "channels-last", ""},
    {"loss-scale", "128", "--amp=fp16"},
    {"loss-scale-window", "100", "--amp=fp16"},
    {"loss-scale-hysteresis", "2", "--amp=fp16"},
    {"min-loss-scale", "1", "--amp=fp16"},
    {"bucket-cap-mb", "4", "--strategy=ddp"},
    {"first-bucket-mb", "2", "--strategy=ddp"},
    {"compression", "topk:0.1", "--strategy=ddp"},
    {"error-feedback", "false", "--strategy=ddp --compression=topk:0.1"},
    {"powersgd-start-iter", "5", "--strategy=ddp --compression=powersgd:2"},
    {"zero3-wrap", "layer", "--strategy=zero3"},
    {"zero3-prefetch", "false", "--strategy=zero3"},
    {"offload", "optimizer", "--strategy=zero2 --offload-dir=/tmp/o"},
    {"offload-tier", "host", "--strategy=zero2"},
    {"offload-dir", "/tmp/o", "--strategy=zero2 --offload=optimizer --offload-tier=host"},
    {"collectives", "hierarchical", "--strategy=ddp"},
    {"ranks-per-node", "2", "--strategy=ddp --collectives=hierarchical"},
    {"inter-node-latency-us", "5", "--strategy=ddp --collectives=hierarchical"},
    {"inter-node-bandwidth-gbps", "10", "--strategy=ddp --collectives=hierarchical"},
    {"sync-period", "4", "--strategy=local-sgd"},
    {"local-sgd-warmup", "2", "--strategy=local-sgd"},
    {"outer-optimizer", "nesterov", "--strategy=local-sgd"},
    {"outer-lr", "0.5", "--strategy=local-sgd --outer-optimizer=nesterov"},
    {"outer-momentum", "0.5", "--strategy=local-sgd --outer-optimizer=nesterov"},
    {"gossip-topology", "exponential", "--strategy=gossip"},
    {"servers", "2", "--strategy=async"},
    {"staleness-bound", "3", "--strategy=async"},
    {"staleness-aware-lr", "true", "--strategy=async"},
    {"batch-assignment", "shared", "--strategy=async"},
    {"net-latency-us", "5", ""},
    {"net-bandwidth-gbps", "10", ""},
    {"straggler", "0:2", ""},
    {"collective-timeout", "30", ""},
    {"inject-fault", "crash:1:3", ""},
    {"stages", "2", "--strategy=pipeline"},
    {"micro-batches", "8", "--strategy=pipeline"},
    {"pipeline-schedule", "gpipe", "--strategy=pipeline"},
    {"chunks", "2", "--strategy=pipeline --pipeline-schedule=interleaved"},
    {"balance", "2,1", "--strategy=pipeline"},
    {"checkpoint-activations", "always", "--strategy=pipeline"},
    {"deferred-batch-norm", "true", "--strategy=pipeline"},
    {"dp-strategy", "zero1", "--strategy=pipeline"},
    {"tensor-parallel", "2", "--strategy=ddp", "tp-head"},
    {"tp-head", "true", "--model=mlp --tensor-parallel=2"},
    {"sequence-parallel", "true", "--model=gpt-tiny --data=text --tensor-parallel=2"},
    {"context-parallel", "2", "--model=gpt-tiny --seq-len=16 --strategy=ddp"},
    {"context-parallel-algorithm", "ulysses",
     "--model=gpt-tiny --seq-len=16 --strategy=ddp --context-parallel=2"},
    {"n-layer", "3", "--model=gpt-tiny"},
    {"n-head", "4", "--model=gpt-tiny"},
    {"n-embd", "64", "--model=gpt-tiny"},
    {"num-classes", "20", "--data=synthetic"},
};

TEST(FlagTable, EveryRowHasAnExample) {
  std::set<std::string> rows, examples;
  for (const Flag* f : table()) EXPECT_TRUE(rows.insert(f->name).second) << "twice: " << f->name;
  for (const Example& e : kExamples) examples.insert(e.flag);
  EXPECT_EQ(rows, examples);
}

// Each flag writes its own field and no other: of the settings the ranks compare, its own
// changes (a must-agree flag) and no other but a default that follows it; a per-rank flag
// changes none.
TEST(FlagTable, EveryFlagWritesItsOwnFieldAndSetting) {
  for (const Example& e : kExamples) {
    const Flag* f = find_flag(e.flag);
    ASSERT_NE(f, nullptr) << e.flag;
    const std::string line = std::string(e.with) + " --" + e.flag + "=" + e.value;
    ASSERT_EQ(error_of(line), "(no error)") << line;
    const Config before = read(e.with), after = read(line);
    EXPECT_NE(f->value.show(before), f->value.show(after)) << line;
    EXPECT_EQ(after.given.count(e.flag), 1u) << line;
    std::set<std::string> changed, expected;
    const auto settings_before = settings_that_must_agree(before);
    const auto settings_after = settings_that_must_agree(after);
    ASSERT_EQ(settings_before.size(), settings_after.size());
    for (size_t i = 0; i < settings_before.size(); ++i) {
      if (settings_before[i] != settings_after[i]) changed.insert(settings_before[i].first);
    }
    if (f->must_agree) expected.insert(f->agreed_name.empty() ? f->name : f->agreed_name);
    if (*e.also_changes != '\0') expected.insert(e.also_changes);
    EXPECT_EQ(changed, expected) << line;
  }
}

// The settings compared at start-up before the table existed, every one of them still there.
TEST(FlagTable, SettingsThatMustAgreeAreThoseOfEveryRankWideFlag) {
  const std::set<std::string> expected = {
      "model", "data", "strategy", "epochs", "batch-size", "lr", "optimizer", "momentum",
      "weight-decay", "schedule", "warmup-epochs", "label-smoothing", "augment", "seed",
      "device type", "train-limit", "synthetic-size", "tokenizer", "seq-len", "context", "recompute", "recompute-modules", "val-limit",
      "eval-every", "sample", "clip-grad-norm", "checkpointing", "checkpoint-format",
      "resume", "stages", "micro-batches", "pipeline-schedule", "chunks", "balance",
      "checkpoint-activations", "tracing", "trace-steps", "report", "dp-strategy", "deferred-batch-norm",
      "amp", "loss-scale", "param-dtype", "memory-format", "loss-scale-window",
      "loss-scale-hysteresis", "min-loss-scale", "bucket-cap-mb", "first-bucket-mb",
      "compression", "error-feedback",
      "gossip-topology", "servers", "staleness-bound", "staleness-aware-lr", "batch-assignment",
      "straggler", "inject-fault", "collectives", "ranks-per-node", "inter-node-latency-us",
      "inter-node-bandwidth-gbps", "sync-period", "local-sgd-warmup", "outer-optimizer",
      "outer-lr", "outer-momentum", "powersgd-start-iter", "net-latency-us",
      "net-bandwidth-gbps", "zero3-wrap", "zero3-prefetch", "tensor-parallel", "tp-head",
      "sequence-parallel", "num-classes", "context-parallel", "context-parallel-algorithm",
      "n-layer", "n-head", "n-embd", "offload", "offload-tier"};
  std::set<std::string> keys;
  for (const auto& [key, value] : settings_that_must_agree(read(""))) {
    EXPECT_TRUE(keys.insert(key).second) << "twice: " << key;
  }
  EXPECT_EQ(keys, expected);
  for (const char* per_rank : {"threads", "metrics", "data-dir", "collective-timeout", "offload-dir"}) {
    EXPECT_FALSE(find_flag(per_rank)->must_agree) << per_rank;
  }
}

TEST(FlagTable, UsageShowsEveryFlagItsValuesDefaultAndStrategies) {
  const std::string help = usage();
  for (const FlagSection& s : flag_sections()) {
    EXPECT_NE(help.find("\n" + s.title + ":\n"), std::string::npos) << s.title;
  }
  for (const Flag* f : table()) {
    EXPECT_NE(help.find("  --" + f->name + "=" + f->value.form), std::string::npos) << f->name;
  }
  EXPECT_NE(help.find("--amp=off|fp16|bf16 "), std::string::npos) << help;
  EXPECT_NE(help.find("M micro-batches per batch [default: 4] [--strategy=pipeline only]"),
            std::string::npos) << help;
  // --momentum's default, not 0.90000000000000002.
  EXPECT_NE(help.find("SGD's momentum [default: 0.9]"), std::string::npos) << help;
}

TEST(FlagTable, AFlagOutsideItsStrategiesNamesBoth) {
  EXPECT_EQ(error_of("--stages=2"), "--stages needs --strategy=pipeline (got --strategy=single)");
  EXPECT_EQ(error_of("--strategy=zero1 --bucket-cap-mb=1"),
            "--bucket-cap-mb sizes the gradient buckets of --strategy=ddp and zero2, and of "
            "--strategy=pipeline --dp-strategy=zero2: it needs --strategy=ddp, zero2 or pipeline "
            "(got --strategy=zero1)");
  const std::vector<std::string> strategies = {"single", "ddp", "zero3", "pipeline", "async"};
  for (const Example& e : kExamples) {
    const Flag& f = *find_flag(e.flag);
    if (f.strategies.empty()) continue;
    std::string other;
    for (const std::string& s : strategies) {
      if (std::find(f.strategies.begin(), f.strategies.end(), s) == f.strategies.end()) other = s;
    }
    const std::string message =
        error_of("--strategy=" + other + " --" + f.name + "=" + e.value);
    EXPECT_EQ(message.rfind("--" + f.name + " ", 0), 0u) << message;
    EXPECT_NE(message.find("needs --strategy=" + f.strategies[0]), std::string::npos) << message;
    EXPECT_NE(message.find("(got --strategy=" + other + ")"), std::string::npos) << message;
  }
}

TEST(FlagTable, UnknownAndMalformedFlagsAreNamed) {
  EXPECT_EQ(error_of("--model=mlp --bogus=1"), "unknown flag --bogus");
  EXPECT_NE(error_of("--checkpoint=x").find("--checkpoint-activations"), std::string::npos);
  EXPECT_EQ(error_of("--lr"), "--lr needs a value (--lr=VALUE)");
  EXPECT_EQ(error_of("lr=1"), "unexpected argument 'lr=1'");
  // A mistyped flag or value gets the closest one the table knows.
  EXPECT_EQ(error_of("--stratgy=ddp"), "unknown flag --stratgy; did you mean --strategy?");
  EXPECT_EQ(error_of("--micro-batch=4"), "unknown flag --micro-batch; did you mean --micro-batches?");
  EXPECT_EQ(error_of("--strategy=zero4"),
            "--strategy must be one of single|ddp|zero1|zero2|zero3|pipeline|gossip|local-sgd|"
            "async, got 'zero4'; did you mean zero3?");
  EXPECT_EQ(error_of("--model=resnet30").substr(error_of("--model=resnet30").find(';')),
            "; did you mean resnet32?");
  EXPECT_EQ(error_of("--amp=bf61"), "--amp must be one of off|fp16|bf16, got 'bf61'; did you mean bf16?");
}

TEST(FlagTable, BadValuesNameTheFlagTheValueAndWhatIsAllowed) {
  EXPECT_EQ(error_of("--model=vgg"), "--model must be one of logistic|mlp|resnet20|resnet32|"
                                     "resnet56|resnet18|resnet34|resnet50|gpt-tiny|gpt-nano|"
                                     "gpt2, got 'vgg'");
  EXPECT_EQ(error_of("--strategy=pipeline --dp-strategy=zero3"),
            "--dp-strategy must be one of ddp|zero1|zero2, got 'zero3'; did you mean zero2?");
  EXPECT_EQ(error_of("--threads=99999999999"),
            "--threads expects an integer >= 1 and <= 2147483647, got '99999999999'");
  EXPECT_EQ(error_of("--label-smoothing=2"),
            "--label-smoothing expects a finite number >= 0 and <= 1, got '2'");
  EXPECT_EQ(error_of("--lr=0"), "--lr must be positive, got '0'");
  EXPECT_EQ(error_of("--strategy=local-sgd --outer-momentum=1"),
            "--outer-momentum must be below 1, got '1'");
  EXPECT_EQ(error_of("--schedule=1f1b"),
            "--schedule is the learning-rate schedule (constant|step|cosine); the pipeline's is "
            "--pipeline-schedule=1f1b");
  EXPECT_EQ(error_of("--metrics="), "--metrics needs a file name, got an empty value");
  EXPECT_EQ(error_of("--augment=maybe"), "--augment expects true or false, got 'maybe'");
  // A parser of another module, its message after the flag's name.
  EXPECT_EQ(error_of("--straggler=x").rfind("--straggler: ", 0), 0u);
  // The same parser's message already naming the flag is not named twice.
  EXPECT_EQ(error_of("--trace=t.json --trace-steps=0").rfind("--trace-steps=0", 0), 0u);
}

TEST(FlagTable, RulesBetweenFlagsAreCheckedAfterTheDefaults) {
  EXPECT_NE(error_of("--strategy=pipeline --chunks=2")
                .find("--chunks=2 needs --pipeline-schedule=interleaved"),
            std::string::npos);
  // --epochs defaults to 5 for logistic, so a warm-up of 5 epochs leaves none to train.
  EXPECT_EQ(error_of("--warmup-epochs=5"), "--warmup-epochs (5) must be less than --epochs (5)");
  // --bucket-cap-mb's row lets --strategy=pipeline through; only its ZeRO-2 stages bucket.
  const std::string buckets = error_of("--strategy=pipeline --dp-strategy=zero1 --bucket-cap-mb=1");
  EXPECT_EQ(buckets.rfind("--bucket-cap-mb sizes the gradient buckets", 0), 0u) << buckets;
  EXPECT_NE(buckets.find("(got --strategy=pipeline --dp-strategy=zero1)"), std::string::npos)
      << buckets;
  EXPECT_EQ(error_of("--strategy=pipeline --dp-strategy=zero2 --bucket-cap-mb=1"), "(no error)");
}

TEST(FlagTable, NumbersShowAsTheShortestExactText) {
  EXPECT_EQ(exact(0.9), "0.9");
  EXPECT_EQ(exact(25), "25");
  EXPECT_NE(exact(0.1 + 0.2), exact(0.3));
  EXPECT_EQ(std::stod(exact(0.1 + 0.2)), 0.1 + 0.2);
}

// A strategy that shares the work, on one rank: a warning naming it and how it was started.
TEST(FlagTable, AParallelStrategyOnOneRankIsWarnedOf) {
  EXPECT_EQ(one_rank_warning(read("--strategy=ddp"), 1, false),
            "warning: --strategy=ddp is running on 1 rank (not started by mpirun): it trains as "
            "one process would, with no other rank to share the work. For N ranks: mpirun -np N "
            "bazel-bin/tools/train ..., or bazel-bin/tools/launch -- mpirun -np N "
            "bazel-bin/tools/train ... to restart after a failure");
  EXPECT_NE(one_rank_warning(read("--strategy=zero3"), 1, true)
                .find("--strategy=zero3 is running on 1 rank (the one rank mpirun or srun started)"),
            std::string::npos);
  EXPECT_EQ(one_rank_warning(read("--strategy=ddp"), 2, true), "");
  EXPECT_EQ(one_rank_warning(read("--strategy=single"), 1, false), "");
}

}  // namespace
}  // namespace train
}  // namespace tessera
