// Reading the command line through the flag table, and the models' defaults. (The checkpoints
// --resume names: tools/train/checkpoints.h.)
#include "tools/train/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <map>
#include <thread>

#include "models/gpt.h"
#include "tensor/check.h"
#include "tools/train/closest_name.h"
#include "tools/train/flag_rules.h"
#include "tools/train/flag_table.h"
#include "tools/train/launcher_rank.h"
#include "tools/train/composition_plan.h"
#include "tools/train/support_table.h"

namespace tessera {
namespace train {

int pipeline_stages(const Config& c, int world_size) {
  return c.stages > 0 ? c.stages : world_size;
}

std::string pipeline_flags(const Config& c, int world_size) {
  std::string s = "--stages=" + std::to_string(pipeline_stages(c, world_size)) +
                  " --micro-batches=" + std::to_string(c.micro_batches) +
                  " --pipeline-schedule=" + c.pipeline_schedule + " --balance=" + c.balance;
  if (c.chunks > 1) s += " --chunks=" + std::to_string(c.chunks);
  return s;
}

namespace {

// Flags that do not exist but that a user may well try, with where to look instead.
const std::map<std::string, std::string> kMistakes = {
    {"checkpoint", "activation checkpointing: --checkpoint-activations; checkpoint files: "
                   "--checkpoint-dir"},
};

}  // namespace

Config read_flags(const std::vector<std::string>& args) {
  Config c;
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0) bad("unexpected argument '" + arg + "'");
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const Flag* flag = find_flag(name);
    if (flag == nullptr) {
      const auto hint = kMistakes.find(name);
      bad("unknown flag --" + name +
          (hint != kMistakes.end() ? " (" + hint->second + ")"
                                   : did_you_mean(name, flag_names(), "--")));
    }
    if (eq == std::string::npos) bad("--" + name + " needs a value (--" + name + "=VALUE)");
    flag->value.set(c, name, arg.substr(eq + 1));
    c.given.insert(name);
  }
  apply_model_defaults(c);
  check_strategies(c);
  check_combinations(c);
  return c;
}

Config parse_flags(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", usage().c_str());
      std::exit(0);
    }
    if (arg == "--support-table") {  // docs/COMPOSITION.md
      std::printf("%s", composition_markdown().c_str());
      std::exit(0);
    }
    if (arg == "--composition-plan") {  // the runs that test the table, one a line
      const CompositionPlan plan = composition_plan();
      for (const PlannedRun& r : plan.runs) {
        std::printf("%d ranks: %s", r.ranks, r.flags.c_str());
        if (r.reference_ranks > 0) {
          std::printf("  ==  %d ranks: %s", r.reference_ranks, r.reference_flags.c_str());
        }
        const std::string restart = value_in(r.values, "restart");
        std::printf("%s%s\n", value_in(r.values, "resume") == "yes" ? "  (resumed)" : "",
                    restart == "none"         ? ""
                    : restart == "same-ranks" ? "  (restarted by tools/launch)"
                                              : ("  (started on " + std::to_string(r.first_ranks) +
                                                 " ranks, restarted on fewer)").c_str());
      }
      std::printf("%zu runs cover %lld pairs of values (the test's time, estimated: %.0f s); %zu pairs cannot meet:\n", plan.runs.size(),
                  static_cast<long long>(plan.pairs_covered), plan.estimated_cost,
                  plan.pairs_not_coverable.size());
      for (const std::string& pair : plan.pairs_not_coverable) std::printf("  %s\n", pair.c_str());
      std::exit(0);
    }
  }
  try {
    return read_flags(args);
  } catch (const FlagError& e) {
    // Found alike by every rank (MPI has not started): said once, by rank 0. The others wait
    // first: mpirun ends the job at the first rank that exits non-zero, which must not be
    // before rank 0 has spoken; they speak only if rank 0 has not ended the job by then.
    const int rank = launcher_rank().value_or(0);
    if (rank > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1000 + 200 * std::min(rank, 10)));
    std::fprintf(stderr, "train%s: %s\n(run with --help for the flags)\n",
                 rank > 0 ? (" (rank " + std::to_string(rank) + ")").c_str() : "", e.what());
    std::exit(2);
  }
}

bool language_model(const Config& c) { return c.model.rfind("gpt", 0) == 0; }

models::GPTConfig gpt_config(const Config& c, int64_t vocab_size) {
  models::GPTConfig config = models::GPTConfig::named(c.model, vocab_size);
  if (c.context > 0) config.context = c.context;
  if (c.n_layer > 0) config.n_layer = c.n_layer;
  if (c.n_head > 0) config.n_head = c.n_head;
  if (c.n_embd > 0) config.n_embd = c.n_embd;
  return config;
}

int64_t gpt_context(const Config& c) { return gpt_config(c, 256).context; }

int64_t gpt_heads(const Config& c) { return gpt_config(c, 256).n_head; }

void apply_model_defaults(Config& c) {
  if (language_model(c)) {
    // GPT-2's recipe (nanoGPT's, scaled to a short run): AdamW with betas (0.9, 0.95)
    // (make_optimizer), lr 6e-4, decoupled weight decay 0.1 on the decay group only.
    if (c.given.count("data") == 0) c.data = "text";
    if (c.optimizer.empty()) c.optimizer = "adamw";
    if (c.lr == 0) c.lr = c.optimizer == "sgd" ? 0.1 : 6e-4;
    if (c.weight_decay < 0) c.weight_decay = c.optimizer == "adamw" ? 0.1 : 0;
    if (c.batch_size == 0) c.batch_size = 16;
    if (c.epochs == 0) c.epochs = 1;
    // 64 tokens: a fortune is a few sentences (a median of about 40 GPT-2 tokens), so a window
    // holds one or two whole quotations, and a gpt-nano step of 16 x 64 tokens takes a fraction
    // of a second on two cores. Every GPT's context holds it (gpt-tiny's is 64).
    if (c.seq_len == 0) c.seq_len = std::min<int64_t>(64, gpt_context(c));
  }
  const bool resnet = c.model.rfind("resnet", 0) == 0;
  if (c.optimizer.empty()) c.optimizer = resnet ? "sgd" : "adam";
  if (c.lr == 0) c.lr = c.optimizer == "sgd" ? 0.1 : 1e-3;
  if (c.batch_size == 0) c.batch_size = resnet ? 128 : 64;
  if (c.epochs == 0) c.epochs = c.model == "logistic" ? 5 : 10;
  // A value given on the command line always wins, 0 included.
  if (c.weight_decay < 0) c.weight_decay = resnet ? 5e-4 : c.optimizer == "adamw" ? 1e-2 : 0;
  if (c.schedule.empty()) c.schedule = "cosine";
  if (c.augment < 0) c.augment = resnet ? 1 : 0;
  // Tensor parallelism splits the MLP's hidden layers (Megatron's block) unless --tp-head; the
  // other models' only large layer to split is the classifier.
  // A GPT's blocks and vocabulary are split (Megatron's: dist/tensor_parallel/gpt_plan.h).
  if (c.tensor_parallel > 1 && c.model != "mlp" && !language_model(c) &&
      c.given.count("tp-head") == 0) {
    c.tp_head = true;
  }
}

}  // namespace train
}  // namespace tessera
