#include "tools/explain/model_flags.h"

#include <algorithm>

#include "cost/stored_profile.h"
#include "tensor/check.h"

namespace tessera {
namespace explain {

const char* const kModelFlagsHelp =
    "  --model=M          logistic|mlp|resnet20|resnet32|resnet56|resnet18|resnet34|resnet50|\n"
    "                     gpt-tiny|gpt-nano|gpt2 (required)\n"
    "  --data=D           fashion-mnist (1x28x28, 10 classes; default) | imagenet (3x224x224, 1000)\n"
    "                     | text (the GPTs' and their default: windows of --seq-len token ids)\n"
    "  --seq-len=T        tokens per window (text; default 64)\n"
    "  --tokenizer=K      gpt2 (GPT-2's BPE, 50257 tokens; default) | byte (256) (text)\n"
    "  --context=N        a GPT's positions (default the model's: gpt-tiny 64, gpt-nano 256,\n"
    "                     gpt2 1024), for windows longer than that\n"
    "  --recompute=R      a GPT's activation recomputation: none (default) | selective | full\n"
    "  --recompute-modules=LIST  selective's ops: core_attn (default), layernorm, gelu\n"
    "  --batch=B          examples (windows) per rank per step (default as tools/train: 128\n"
    "                     ResNets, 16 GPTs, 64 others)\n"
    "  --precision=P      f32 (default) | mixed (16-bit parameters, f32 master copy)\n"
    "  --optimizer=O      sgd (with momentum) | adam (default as tools/train: sgd ResNets, adam others)\n";

const char* const kTimeFlagsHelp =
    "  (the layers' times: the model's stored profile, cost/profiles/<model>-<data>.json, measured\n"
    "  once on the machine it names and scaled to --batch; the same flags give the same figures)\n"
    "  --measure          time the layers on this machine now instead (figures vary with its load)\n"
    "  --compute-ms=T     forward + backward of one batch takes T ms (e.g. on a GPU), split among\n"
    "                     the layers as the stored profile (or --measure) splits it\n"
    "  --layer-ms=a,b,..  forward + backward ms of each layer, given outright (no profile)\n"
    "  --profile-batch=b  --measure's batch (default: --batch; at most 4 with --compute-ms)\n"
    "  --repeats=r        --measure's timed passes after a warm-up (default 1)\n"
    "  --overhead-ms=T    per step outside the layers: the loss, the engine, the optimizer step\n"
    "                     (default: the stored profile's at its batch and optimizer, or measured\n"
    "                     with the layers; 0 with --compute-ms or --layer-ms)\n"
    "  (a model and input with no stored profile are measured now, and say so)\n";

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ",";
    out += digits[i];
  }
  return out;
}

ModelChoice read_model_flags(Flags& flags) {
  ModelChoice c;
  c.name = flags.required("model");
  const bool gpt = cost::is_language_model(c.name);
  c.input = parsed("data", flags.text("data", gpt ? "text" : "fashion-mnist"), cost::parse_model_input);
  if (c.input.text()) {
    c.input.seq_len = flags.integer("seq-len", 64, 1);
    const std::string tokenizer = flags.text("tokenizer", "gpt2");
    TS_CHECK(tokenizer == "gpt2" || tokenizer == "byte", "--tokenizer=", tokenizer,
             ": expected gpt2 (GPT-2's BPE, 50257 tokens) or byte (256)");
    c.input.vocab = tokenizer == "gpt2" ? 50257 : 256;
    c.input.context = flags.integer("context", 0, 0);
    const std::string recompute = flags.text("recompute", "none");
    const std::string modules = flags.text("recompute-modules", "core_attn");
    TS_CHECK(recompute == "selective" || !flags.has("recompute-modules"),
             "--recompute-modules=", modules, " chooses --recompute=selective's ops; this has "
             "--recompute=", recompute);
    c.input.recompute = models::Recompute::parse(recompute, modules);
  }
  const bool resnet = c.name.rfind("resnet", 0) == 0;
  // tools/train's batches: 128 images for ResNets, 64 otherwise; 16 windows for a GPT.
  c.batch = flags.integer("batch", resnet ? 128 : gpt ? 16 : 64, 1);
  c.setup.precision = parsed("precision", flags.text("precision", "f32"), cost::parse_precision);
  c.setup.optimizer =
      parsed("optimizer", flags.text("optimizer", resnet ? "sgd" : "adam"), cost::parse_optimizer);
  c.model = parsed("model", c.name, [&](const std::string& name) { return cost::build_model(name, c.input); });
  c.profile = cost::describe_model(c.name, *c.model, c.input, c.batch);
  return c;
}

namespace {

// Times every layer here and now (and, for a whole step at the batch, the step overhead).
void measure_now(ModelChoice& c, int64_t profile_batch, int repeats, bool with_overhead) {
  cost::measure_layer_times(*c.model, c.input, profile_batch, repeats, &c.profile);
  c.profile.times_source = "measured now on " + cost::this_machine() + " at batch " +
                           std::to_string(profile_batch);
  if (with_overhead && profile_batch == c.batch) {
    cost::measure_step_overhead(*c.model, c.input, c.setup, repeats, &c.profile);
  }
}

}  // namespace

void add_times(Flags& flags, ModelChoice& c) {
  const std::vector<double> layer_ms = flags.numbers("layer-ms", 0);
  const double compute_ms = flags.number("compute-ms", 0, 0);
  const double overhead_ms = flags.number("overhead-ms", -1, 0);
  const bool measure = flags.boolean("measure");
  if (!layer_ms.empty()) {
    TS_CHECK(compute_ms == 0, "--layer-ms and --compute-ms: give one of them");
    TS_CHECK(!measure, "--layer-ms and --measure: give one of them (--layer-ms times nothing)");
    std::vector<double> seconds;
    for (double ms : layer_ms) seconds.push_back(ms / 1e3);
    TS_CHECK(seconds.size() == c.profile.layers.size(), "--layer-ms: ", c.name, " has ",
             c.profile.layers.size(), " layers, got ", seconds.size(), " times");
    cost::set_layer_times(&c.profile, seconds, "given per layer by --layer-ms");
    if (overhead_ms >= 0) c.profile.step_overhead_seconds = overhead_ms / 1e3;
    return;
  }
  // The stored profile unless --measure: the same flags give the same figures on every run.
  const cost::StoredProfile* stored = measure ? nullptr : cost::find_stored_profile(c.name, c.input);
  if (stored != nullptr) {
    for (const char* name : {"repeats", "profile-batch"}) {
      TS_CHECK(!flags.has(name), "--", name, " sets how the layers are measured: add --measure "
               "(without it their times are the stored profile ", stored->path, "'s)");
    }
    cost::apply_stored_profile(*stored, c.setup.optimizer, &c.profile);
  } else {
    const int repeats = static_cast<int>(flags.integer("repeats", 1, 1));
    const int64_t profile_batch =
        flags.integer("profile-batch", compute_ms > 0 ? std::min<int64_t>(c.batch, 4) : c.batch, 1);
    // The loss, the engine and the optimizer step: measured with the layers, given, or (for a
    // total given by --compute-ms, another machine's) left out unless given.
    measure_now(c, profile_batch, repeats, compute_ms == 0 && overhead_ms < 0);
    if (!measure) {
      c.profile.times_source += " (no stored profile of " + c.name + " on this input: explain "
                                "profile measures one for " + cost::stored_profile_path(c.name, c.input) + ")";
    }
    if (compute_ms == 0 && profile_batch != c.batch) {
      cost::scale_compute_time(&c.profile, c.profile.compute_seconds() * c.batch / profile_batch,
                               c.profile.times_source + ", scaled to batch " + std::to_string(c.batch));
    }
  }
  if (compute_ms > 0) {
    // Another machine's total (a GPU's), split among the layers as the profile splits it.
    c.profile.step_overhead_seconds = 0;
    cost::scale_compute_time(&c.profile, compute_ms / 1e3,
                             "given by --compute-ms, split as the " + c.profile.times_source);
  }
  if (overhead_ms >= 0) c.profile.step_overhead_seconds = overhead_ms / 1e3;
}

std::string describe(const ModelChoice& c) {
  const std::string data =
      c.input.text() ? "text (windows of " + std::to_string(c.input.seq_len) + " tokens, vocabulary " +
                           std::to_string(c.input.vocab) + ")"
                     : c.input.name;
  return c.name + " on " + data + ": psi = " + with_commas(c.profile.parameters()) +
         " parameters, " + std::to_string(c.profile.layers.size()) + " layers, batch " +
         std::to_string(c.batch) + ", " + cost::precision_name(c.setup.precision) + ", " +
         cost::optimizer_name(c.setup.optimizer);
}

}  // namespace explain
}  // namespace tessera
