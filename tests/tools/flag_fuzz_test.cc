// The flag fuzzer: the train tool on random picks from every flag's values (read off the flag
// table's forms, seeded), on 1 to 4 ranks, must end with exit 0 (it trained) or exit 2 (it
// said which flags cannot work), within its time limit: never exit 1, a crash or a hang.
//
// Each run keeps a short training (64 synthetic images, one epoch, one thread a rank) and picks
// the strategy and 2 to 5 other flags, mostly ones the strategy takes; a value is one the flag
// takes, or (one pick in 15) one it should refuse. Under `bazel test` a few runs (seed 1); the
// longer sweep is `tools/bench/flag_fuzz.sh 200 7` (FLAG_FUZZ_RUNS and FLAG_FUZZ_SEED given to
// this binary), which prints every run that failed with its command; FLAG_FUZZ_VERBOSE=1 prints
// every run's exit and first message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "tests/tools/train_runner.h"
#include "tools/train/flag_table.h"

namespace tessera {
namespace testing {
namespace {

// Flags every run fixes (its length and what it reads), and the fault injection, whose crash
// and stall are exit 1 and a hang by design.
const std::set<std::string> kFixed = {"epochs", "train-limit", "synthetic-size", "threads",
                                      "collective-timeout", "data", "data-dir", "inject-fault",
                                      "warmup-epochs"};

// Values for a form's placeholders ("topk:RATIO", "RANK:FACTOR"), each one the flag takes; a
// value it should refuse comes from kRefused instead, now and then.
const std::map<std::string, std::vector<std::string>> kPlaceholders = {
    {"N", {"1", "2", "3", "4"}},     {"X", {"0.5", "1", "0.01", "0.1"}},
    {"B", {"0", "2"}},               {"RATIO", {"0.05", "0.5"}},
    {"LEVELS", {"4", "16"}},         {"RANK", {"0", "1", "2"}},
    {"STEP", {"1", "3"}},            {"FACTOR", {"1.5", "2"}},
    {"FIRST", {"1"}},                {"LAST", {"2"}},
    {"SECONDS", {"30"}},             {"PHASE", {"mid-shard", "before-index"}},
};
const std::vector<std::string> kRefused = {"x", "", "1e999", "-1", "nan", "0"};

// Flags that mean something only beside another: a pick of one brings the other (without it the
// flag checker refuses the pair at once, and the run would test nothing more).
const std::map<std::string, std::string> kCompanions = {
    {"error-feedback", "--compression=topk:0.1"},
    {"powersgd-start-iter", "--compression=powersgd:2"},
    {"ranks-per-node", "--collectives=hierarchical"},
    {"inter-node-latency-us", "--collectives=hierarchical"},
    {"inter-node-bandwidth-gbps", "--collectives=hierarchical"},
    {"trace-steps", "--trace=/tmp/tessera_flag_fuzz_trace.json"},
    {"loss-scale", "--amp=fp16"},
    {"loss-scale-window", "--amp=fp16"},
    {"loss-scale-hysteresis", "--amp=fp16"},
    {"min-loss-scale", "--amp=fp16"},
    {"outer-lr", "--outer-optimizer=nesterov"},
    {"outer-momentum", "--outer-optimizer=nesterov"},
    {"chunks", "--pipeline-schedule=interleaved"},
    {"tp-head", "--tensor-parallel=2"},
    {"num-classes", "--data=synthetic"},
};

std::string pick(const std::vector<std::string>& values, std::mt19937_64& rng) {
  return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
}

// A value for a flag of form `form`: "ddp|zero1" picks an option; "N" a number; "topk:RATIO"
// a number in place of RATIO; "[:BUCKET]" dropped or filled; FILE and DIR paths in `dir`.
std::string value_for(const std::string& name, const std::string& form, const std::string& dir,
                      std::mt19937_64& rng) {
  if (form == "FILE" || form == "DIR" || form == "FILE|DIR") {
    return pick({dir + "/" + name, dir + "/" + name + "-" + std::to_string(rng() % 100),
                 "/nonexistent/" + name},
                rng);
  }
  std::vector<std::string> options;
  size_t start = 0;
  for (size_t bar = form.find('|');; bar = form.find('|', start)) {
    options.push_back(form.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  std::string v = pick(options, rng);
  if (v.find("[:") != std::string::npos) {  // an optional part
    v = rng() % 2 ? v.substr(0, v.find("[:")) : v.substr(0, v.find("[:")) + ":" + pick({"64", "512", "0"}, rng);
  }
  // Fill each placeholder (an upper-case word) with one of its values.
  std::string out;
  for (size_t k = 0; k < v.size();) {
    size_t e = k;
    while (e < v.size() && std::isupper(static_cast<unsigned char>(v[e]))) ++e;
    if (e > k) {
      const auto it = kPlaceholders.find(v.substr(k, e - k));
      out += it == kPlaceholders.end() ? "1" : pick(it->second, rng);
      k = e;
    } else {
      out += v[k++];
    }
  }
  if (rng() % 15 == 0) out = pick(kRefused, rng);
  return out;
}

struct FuzzRun {
  int ranks;
  std::string flags;
};

FuzzRun random_run(std::mt19937_64& rng, const std::string& dir) {
  std::vector<const train::Flag*> flags;
  const train::Flag* strategy = nullptr;
  for (const train::FlagSection& s : train::flag_sections()) {
    for (const train::Flag& f : s.flags) {
      if (f.name == "strategy") strategy = &f;
      else if (kFixed.count(f.name) == 0) flags.push_back(&f);
    }
  }
  FuzzRun run;
  run.ranks = static_cast<int>(1 + rng() % 4);
  const std::string chosen = value_for("strategy", strategy->value.form, dir, rng);
  run.flags = "--data=synthetic --synthetic-size=64 --batch-size=8 --epochs=1 --threads=1 "
              "--collective-timeout=60 --strategy=" + chosen;
  // Mostly flags the strategy takes (the others are refused by the flag table at once).
  std::vector<const train::Flag*> taken;
  for (const train::Flag* f : flags) {
    const bool takes = f->strategies.empty() ||
                       std::find(f->strategies.begin(), f->strategies.end(), chosen) != f->strategies.end();
    if (takes || rng() % 10 == 0) taken.push_back(f);
  }
  std::shuffle(taken.begin(), taken.end(), rng);
  const size_t n = std::min(taken.size(), static_cast<size_t>(2 + rng() % 4));
  std::set<std::string> given;
  for (size_t k = 0; k < n; ++k) {
    run.flags += " --" + taken[k]->name + "=" + value_for(taken[k]->name, taken[k]->value.form, dir, rng);
    given.insert(taken[k]->name);
    const auto companion = kCompanions.find(taken[k]->name);
    if (companion != kCompanions.end()) {
      const std::string flag = companion->second.substr(2, companion->second.find('=') - 2);
      if (given.insert(flag).second) run.flags += " " + companion->second;
    }
  }
  return run;
}

TEST(FlagFuzz, EveryRunEndsWithExitZeroOrTwo) {
  const int runs = std::getenv("FLAG_FUZZ_RUNS") ? std::atoi(std::getenv("FLAG_FUZZ_RUNS")) : 8;
  const uint64_t seed = std::getenv("FLAG_FUZZ_SEED") ? std::strtoull(std::getenv("FLAG_FUZZ_SEED"), nullptr, 10) : 1;
  char tmpl[] = "/tmp/tessera_flag_fuzz_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::mt19937_64 rng(seed);
  std::map<int, int> exits;
  for (int i = 0; i < runs; ++i) {
    const FuzzRun run = random_run(rng, dir);
    // timeout: exit 124 when the run outlives its limit (a hang).
    const std::string command =
        "timeout -k 5 240 " +
        (run.ranks == 1 ? train_binaries().train
                        : train_binaries().runner + " " + std::to_string(run.ranks) + " " +
                              train_binaries().train) +
        " " + run.flags;
    const CommandResult r = run_command(command);
    ++exits[r.exit_code];
    if (std::getenv("FLAG_FUZZ_VERBOSE") != nullptr) {  // each run's exit and its first message
      const size_t at = r.output.find("train");
      std::printf("%d ranks, exit %d: %s\n  %s\n", run.ranks, r.exit_code, run.flags.c_str(),
                  at == std::string::npos ? "" : r.output.substr(at, r.output.find('\n', at) - at).c_str());
    }
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2)
        << "run " << i << " (seed " << seed << "), exit " << r.exit_code << (r.exit_code == 124 ? " (a hang)" : "")
        << " on " << run.ranks << " ranks:\n  train " << run.flags << "\n"
        << r.output.substr(r.output.size() > 3000 ? r.output.size() - 3000 : 0);
  }
  std::printf("flag fuzz, seed %llu: %d runs;", static_cast<unsigned long long>(seed), runs);
  for (const auto& [code, count] : exits) std::printf(" exit %d: %d;", code, count);
  std::printf("\n");
}

}  // namespace
}  // namespace testing
}  // namespace tessera

int main(int argc, char** argv) { return tessera::testing::train_test_main(argc, argv); }
