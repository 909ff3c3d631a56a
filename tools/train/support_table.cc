// The support table's rows: the axes and the refusals (support_table.h says how they are read).
// A refusal's `why` is what a user needs to choose instead; the cases that were silent wrong
// answers or crashes before they were refused say what went wrong.
#include "tools/train/support_table.h"

#include <algorithm>

#include "tensor/check.h"
#include "tools/train/flag_table.h"
#include "tools/train/flag_values.h"

namespace tessera {
namespace train {

namespace {

const std::vector<std::string> kStrategies = {"single", "ddp",       "zero1",  "zero2", "zero3",
                                              "pipeline", "local-sgd", "gossip", "async"};
const std::vector<std::string> kCompressions = {"none", "fp16", "bf16", "topk",
                                                "randomk", "qsgd", "sign", "powersgd"};
// --compression's kinds that change the values sent (not only their precision).
const std::vector<std::string> kLossyCompressors = {"topk", "randomk", "qsgd", "sign", "powersgd"};

std::vector<std::string> except(const std::vector<std::string>& all,
                                const std::vector<std::string>& removed) {
  std::vector<std::string> out;
  for (const std::string& s : all) {
    if (std::find(removed.begin(), removed.end(), s) == removed.end()) out.push_back(s);
  }
  return out;
}

// An axis whose values are a flag's own values: "--amp=fp16".
Axis flag_axis(const std::string& name, std::vector<std::string> values,
               std::string Config::*field) {
  Axis a;
  a.name = name;
  a.flag = name;
  a.values = std::move(values);
  a.value_of = [field](const Config& c) { return c.*field; };
  a.flags_for = [name](const std::string& v) { return "--" + name + "=" + v; };
  a.shown = [name, field](const Config& c) { return "--" + name + "=" + c.*field; };
  return a;
}

std::string compression_kind(const Config& c) {
  return c.compression.substr(0, c.compression.find(':'));
}

bool error_feedback_on(const Config& c) {
  if (c.compression == "none") return false;
  if (c.error_feedback != "default") return c.error_feedback == "true";
  const std::string kind = compression_kind(c);  // dist/compression/make_hook.h's default
  return kind == "topk" || kind == "sign" || kind == "powersgd";
}

std::vector<Axis> make_axes() {
  std::vector<Axis> axes;
  axes.push_back(flag_axis("strategy", kStrategies, &Config::strategy));
  axes.push_back(flag_axis("amp", {"off", "bf16", "fp16"}, &Config::amp));
  axes.push_back(flag_axis("param-dtype", {"f32", "bf16", "f16"}, &Config::param_dtype));

  Axis compression = flag_axis("compression", kCompressions, &Config::compression);
  compression.value_of = compression_kind;
  compression.flags_for = [](const std::string& v) -> std::string {
    if (v == "topk" || v == "randomk") return "--compression=" + v + ":0.05";
    if (v == "qsgd") return "--compression=qsgd:16";
    if (v == "powersgd") return "--compression=powersgd:2 --powersgd-start-iter=2";
    return "--compression=" + v;
  };
  axes.push_back(compression);

  Axis feedback;
  feedback.name = feedback.flag = "error-feedback";
  feedback.values = {"off", "on"};
  feedback.value_of = [](const Config& c) { return error_feedback_on(c) ? "on" : "off"; };
  feedback.flags_for = [](const std::string& v) {
    return std::string("--error-feedback=") + (v == "on" ? "true" : "false");
  };
  feedback.always_given = true;
  feedback.applies_when = {{"compression", except(kCompressions, {"none"})}};
  feedback.shown = [](const Config& c) {
    return c.error_feedback == "default"
               ? "--compression=" + c.compression + " (error feedback on by default)"
               : "--error-feedback=" + c.error_feedback;
  };
  axes.push_back(feedback);

  Axis checkpoint;
  checkpoint.name = "checkpoint";
  checkpoint.flag = "checkpoint-format";
  checkpoint.values = {"none", "full", "sharded"};
  checkpoint.value_of = [](const Config& c) {
    const bool none = c.checkpoint_dir.empty() && c.given.count("checkpoint-format") == 0;
    return none ? std::string("none") : c.checkpoint_format;
  };
  checkpoint.flags_for = [](const std::string& v) {
    return v == "none" ? std::string() : "--checkpoint-format=" + v;
  };
  checkpoint.shown = [value_of = checkpoint.value_of](const Config& c) {
    return value_of(c) == "none" ? std::string("no --checkpoint-dir")
                                 : "--checkpoint-format=" + c.checkpoint_format;
  };
  axes.push_back(checkpoint);

  Axis resume;
  resume.name = resume.flag = "resume";
  resume.values = {"no", "yes"};
  resume.value_of = [](const Config& c) { return c.resume.empty() ? "no" : "yes"; };
  resume.flags_for = [](const std::string&) { return std::string(); };  // the test resumes
  resume.shown = [](const Config& c) { return "--resume=" + c.resume; };
  axes.push_back(resume);

  Axis tensor_parallel;
  tensor_parallel.name = tensor_parallel.flag = "tensor-parallel";
  tensor_parallel.values = {"off", "on"};
  tensor_parallel.value_of = [](const Config& c) { return c.tensor_parallel > 1 ? "on" : "off"; };
  tensor_parallel.flags_for = [](const std::string& v) {
    return v == "on" ? std::string("--tensor-parallel=2") : std::string();
  };
  tensor_parallel.shown = [](const Config& c) {
    return "--tensor-parallel=" + std::to_string(c.tensor_parallel);
  };
  axes.push_back(tensor_parallel);

  Axis context_parallel;
  context_parallel.name = context_parallel.flag = "context-parallel";
  context_parallel.values = {"off", "on"};
  context_parallel.value_of = [](const Config& c) { return c.context_parallel > 1 ? "on" : "off"; };
  context_parallel.flags_for = [](const std::string& v) {
    return v == "on" ? std::string("--context-parallel=2") : std::string();
  };
  context_parallel.shown = [](const Config& c) {
    return "--context-parallel=" + std::to_string(c.context_parallel);
  };
  axes.push_back(context_parallel);

  Axis schedule = flag_axis("pipeline-schedule", {"1f1b", "gpipe", "interleaved", "zb-h1", "zb-h2"},
                            &Config::pipeline_schedule);
  axes.push_back(schedule);
  axes.push_back(flag_axis("dp-strategy", {"ddp", "zero1", "zero2"}, &Config::dp_strategy));

  Axis model;
  model.name = "model";
  model.flag = "model";
  model.values = {"plain", "batch-norm", "transformer"};
  model.value_of = [](const Config& c) {
    return language_model(c) ? "transformer"
           : c.model.rfind("resnet", 0) == 0 ? "batch-norm" : "plain";
  };
  model.flags_for = [](const std::string& v) {
    if (v == "transformer") return std::string("--model=gpt-tiny --tokenizer=byte --seq-len=16");
    return v == "plain" ? std::string("--model=mlp") : std::string("--model=resnet20");
  };
  model.shown = [](const Config& c) { return "--model=" + c.model; };
  model.always_given = true;
  axes.push_back(model);

  // A GPT's weight decay falls on its decay group only (models::weight_decay_groups: the Linear
  // weights), so its optimizer holds two parameter groups; the other models decay every
  // parameter alike, in one group.
  Axis decay;
  decay.name = "weight-decay-groups";
  decay.flag = "weight-decay";
  decay.values = {"off", "on"};
  decay.value_of = [](const Config& c) {
    return language_model(c) && c.weight_decay > 0 ? "on" : "off";
  };
  decay.flags_for = [](const std::string& v) {
    return std::string("--weight-decay=") + (v == "on" ? "0.1" : "0");
  };
  decay.shown = [](const Config& c) {
    return "--weight-decay=" + exact(c.weight_decay) + " (" + c.optimizer +
           " decaying the GPT's Linear weights only)";
  };
  decay.applies_when = {{"model", {"transformer"}}};
  axes.push_back(decay);

  // A GPT's activation recomputation (models::Recompute): selective with all of its ops, so a
  // generated run exercises every recomputed output.
  Axis recompute = flag_axis("recompute", {"none", "selective", "full"}, &Config::recompute);
  recompute.flags_for = [](const std::string& v) {
    return v == "selective" ? std::string("--recompute=selective --recompute-modules=core_attn,"
                                          "layernorm,gelu")
                            : "--recompute=" + v;
  };
  recompute.applies_when = {{"model", {"transformer"}}};
  axes.push_back(recompute);

  // Sequence parallelism: a GPT's under tensor parallelism only (after both axes, so the plan
  // knows whether it applies when its turn comes).
  Axis sequence_parallel;
  sequence_parallel.name = sequence_parallel.flag = "sequence-parallel";
  sequence_parallel.values = {"off", "on"};
  sequence_parallel.value_of = [](const Config& c) { return c.sequence_parallel ? "on" : "off"; };
  sequence_parallel.flags_for = [](const std::string& v) {
    return v == "on" ? std::string("--sequence-parallel=true") : std::string();
  };
  sequence_parallel.shown = [](const Config& c) {
    return std::string("--sequence-parallel=") + (c.sequence_parallel ? "true" : "false");
  };
  sequence_parallel.applies_when = {{"tensor-parallel", {"on"}}, {"model", {"transformer"}}};
  axes.push_back(sequence_parallel);

  Axis collectives = flag_axis("collectives", {"flat", "hierarchical"}, &Config::collectives);
  collectives.flags_for = [](const std::string& v) {
    return v == "flat" ? std::string() : std::string("--collectives=hierarchical --ranks-per-node=1");
  };
  axes.push_back(collectives);

  // tools/launch's restart after a failure: from the newest committed checkpoint, on the same
  // ranks, or on fewer (the most the hostfile's slots and the run's layout allow). The launcher
  // checks its command with each (tools/launch/command.h); the train tool runs none.
  Axis restart;
  restart.name = "restart";
  restart.values = {"none", "same-ranks", "fewer-ranks"};
  restart.value_of = [](const Config& c) { return c.restart; };
  restart.flags_for = [](const std::string&) { return std::string(); };  // the test launches
  restart.shown = [](const Config& c) {
    return c.restart == "fewer-ranks" ? std::string("a restart by tools/launch on fewer ranks")
                                      : std::string("a restart by tools/launch");
  };
  axes.push_back(restart);
  return axes;
}

// The refusals. Each names the fewest axes that make the combination fail.
std::vector<Refusal> make_refusals() {
  const std::vector<std::string> half = {"fp16", "bf16"};          // --compression, --amp
  const std::vector<std::string> half_params = {"f16", "bf16"};  // --param-dtype
  return {
      // Compression.
      {{{"compression", kLossyCompressors},
        {"strategy", except(kStrategies, {"ddp"})}},
       "the compressors are DDP's communication hooks over its gradient buckets; ZeRO's, the "
       "pipeline's, local SGD's, gossip's and the parameter servers' messages are not compressed "
       "(one process sends nothing)"},
      {{{"compression", half}, {"strategy", except(kStrategies, {"ddp", "zero1", "zero2"})}},
       "half-precision compression is DDP's hook, or ZeRO-1/2's reduce-scatter in half "
       "precision; ZeRO-3's, the pipeline's and the other strategies' collectives stay in their "
       "own precision"},
      {{{"compression", except(kCompressions, {"none"})}, {"param-dtype", half_params},
        {"strategy", {"ddp"}}},
       "DDP's compressors read and write f32 gradient buckets, and half-precision parameters "
       "have half-precision gradients, which DDP already sends in half precision (train f32 "
       "parameters under --amp instead)"},
      {{{"strategy", {"zero1"}}, {"compression", {"fp16"}}, {"amp", {"fp16"}}},
       "ZeRO-1 reduce-scatters in step(), after the loss scaler has unscaled the gradients, so "
       "fp16's range loses the small ones (ZeRO-2 sends them scaled, during backward): use "
       "--strategy=zero2 or --compression=bf16"},
      {{{"strategy", {"zero1"}}, {"compression", {"fp16"}}, {"param-dtype", {"f16"}}},
       "ZeRO-1 reduce-scatters in step(), after the loss scaler has unscaled the gradients, so "
       "fp16's range loses the small ones (ZeRO-2 sends them scaled, during backward): use "
       "--strategy=zero2 or --compression=bf16"},
      {{{"strategy", {"zero1", "zero2"}}, {"compression", half}, {"error-feedback", {"on"}}},
       "ZeRO's reduce-scatter in half precision keeps no residual to feed back (error feedback "
       "is DDP's hook wrapper): drop --error-feedback, or use --strategy=ddp"},

      {{{"compression", kLossyCompressors}, {"tensor-parallel", {"on"}}},
       "a tensor-parallel rank's gradient buckets hold its own slices beside the parameters every "
       "rank of the group holds whole (a row-parallel layer's bias), so each rank would compress "
       "those differently and their copies would drift apart; fp16 and bf16 compress element by "
       "element and keep them equal"},

      // Precision.
      {{{"amp", {"fp16"}}, {"param-dtype", {"bf16"}}},
       "that mixes f16 and bf16: choose one half type"},
      {{{"amp", {"bf16"}}, {"param-dtype", {"f16"}}},
       "that mixes f16 and bf16: choose one half type"},
      {{{"strategy", {"async"}}, {"amp", {"fp16"}}},
       "the workers push f32 gradients to servers holding f32 parameters, which apply each push "
       "on arrival, so no step exists at which every rank could skip an overflow together: it "
       "takes --amp=bf16 or off, not loss scaling or half parameters"},
      {{{"strategy", {"async"}}, {"param-dtype", half_params}},
       "the servers hold f32 parameters and apply f32 gradients: it takes --amp=bf16 or off, not "
       "loss scaling or half parameters"},
      {{{"strategy", {"local-sgd", "gossip"}}, {"param-dtype", half_params}},
       "the optimizer steps an f32 master copy of half-precision parameters and writes it over "
       "them, so the averaged parameters would be overwritten at the next step by each rank's own "
       "master and the ranks would never agree (train f32 parameters under --amp instead)"},

      {{{"strategy", {"zero3"}}, {"param-dtype", half_params}, {"model", {"batch-norm"}}},
       "a ZeRO-3 unit is one flat parameter of one dtype, and BatchNorm's parameters stay f32 "
       "beside the half-precision convolutions of its block (train f32 parameters under --amp "
       "instead: ZeRO-3 then gathers its units in the autocast dtype)"},

      // Checkpoints and resume.
      {{{"checkpoint", {"sharded"}}, {"strategy", except(kStrategies, {"zero1", "zero2", "zero3"})}},
       "the sharded format writes ZeRO's shards, one file per rank; the full format holds every "
       "other strategy's state (and any strategy resumes from a sharded checkpoint)"},
      {{{"checkpoint", {"sharded"}}, {"tensor-parallel", {"on"}}},
       "the sharded format cuts ZeRO's flat vector, not tensor-parallel slices: use the full "
       "format"},

      // Tensor parallelism.
      {{{"tensor-parallel", {"on"}}, {"strategy", {"zero2", "zero3", "local-sgd", "gossip", "async"}}},
       "tensor parallelism combines with --strategy=ddp or zero1 for the data-parallel "
       "dimension (single when there is none), or with the pipeline (3D)"},

      // Sequence parallelism.
      {{{"sequence-parallel", {"on"}}, {"tensor-parallel", {"off"}}},
       "sequence parallelism splits the LayerNorms and the residual stream that tensor "
       "parallelism leaves whole on its ranks: give --tensor-parallel=T of 2 or more"},
      {{{"sequence-parallel", {"on"}}, {"tensor-parallel", {"on"}}, {"model", {"plain", "batch-norm"}}},
       "sequence parallelism splits a transformer's tokens (a GPT's, --model=gpt-*); the other "
       "models have no sequence"},

      // Context parallelism. (Its strategies and tensor parallelism before its models, so that
      // a run of the default model given one of them hears that reason.)
      {{{"context-parallel", {"on"}},
        {"strategy", {"zero3", "pipeline", "local-sgd", "gossip", "async"}}},
       "context parallelism combines with --strategy=ddp, zero1 or zero2 for the data-parallel "
       "dimension (single when there is none), whose gradient averages over the world are the "
       "dp x cp average it needs; ZeRO-3's units, the pipeline's stages and the decentralized "
       "strategies' own averaging have not been built around the sequence split"},
      {{{"context-parallel", {"on"}}, {"tensor-parallel", {"on"}}},
       "context x tensor parallelism needs a 3-D topology (cp groups inside tp x dp) that the "
       "tool does not build yet: choose one of the two"},
      {{{"context-parallel", {"on"}}, {"model", {"plain", "batch-norm"}}},
       "context parallelism splits each sequence over the ranks and passes attention's keys and "
       "values around them: it is for --model=gpt-*; the MLP and the ResNets see one example "
       "at a time and have no sequence to split"},

      // The pipeline.
      {{{"strategy", {"pipeline"}}, {"dp-strategy", {"zero2"}}, {"pipeline-schedule", {"zb-h1", "zb-h2"}},
        {"model", {"batch-norm"}}},
       "a zero-bubble schedule defers weight gradients to its W passes, but BatchNorm's arrive "
       "in B, after ZeRO-2 has reduced their bucket: use --dp-strategy=ddp or zero1, or another "
       "schedule"},
      {{{"strategy", {"pipeline"}}, {"dp-strategy", {"zero2"}}, {"pipeline-schedule", {"zb-h1", "zb-h2"}},
        {"tensor-parallel", {"on"}}},
       "a zero-bubble schedule defers weight gradients to its W passes, but a row-parallel "
       "Linear's bias, added after its all-reduce, gets its gradient in B, and ZeRO-2 then sees "
       "it twice in one reduction (found by the restart tests on 8 ranks: exit 1): use "
       "--dp-strategy=ddp or zero1, or another schedule"},

      // The GPT.
      {{{"strategy", {"pipeline"}}, {"dp-strategy", {"zero2"}}, {"pipeline-schedule", {"zb-h1", "zb-h2"}},
        {"model", {"transformer"}}},
       "a zero-bubble schedule defers the Linear weights' gradients to its W passes, but the "
       "LayerNorms' and the embedding's arrive in B, where ZeRO-2 has already reduced their "
       "bucket (dist/zero: 'received a second gradient in one backward'): use --dp-strategy=ddp "
       "or zero1, or another schedule"},
      {{{"weight-decay-groups", {"on"}}, {"model", {"transformer"}}, {"strategy", {"async"}}},
       "the parameter servers step their shards of the flat parameter vector with one set of "
       "options, so they cannot decay the GPT's Linear weights while sparing its biases, "
       "LayerNorms and embeddings: give --weight-decay=0 (or use --strategy=ddp, zero1, zero2 "
       "or zero3, whose shards are cut by the groups)"},

      // Hierarchical collectives.
      {{{"collectives", {"hierarchical"}},
        {"strategy", except(kStrategies, {"ddp", "zero1", "zero2", "zero3"})}},
       "the hierarchical collectives are DDP's buckets (a communication hook) and ZeRO's "
       "reduce-scatters and all-gathers (dist::HierarchicalGroup)"},
      {{{"collectives", {"hierarchical"}}, {"tensor-parallel", {"on"}}},
       "the hierarchical collectives reduce over the world's nodes, not over tensor-parallel "
       "groups"},
      {{{"collectives", {"hierarchical"}}, {"compression", except(kCompressions, {"none"})}},
       "a DDP bucket goes through one communication hook: the compressor or the hierarchical "
       "all-reduce, not both"},

      // Restarts.
      {{{"restart", {"same-ranks", "fewer-ranks"}}, {"checkpoint", {"none"}}},
       "tools/launch restarts a job from the newest committed checkpoint in its "
       "--checkpoint-dir: give one"},
      {{{"restart", {"fewer-ranks"}}, {"strategy", {"single"}}},
       "one process has no fewer ranks to restart on"},
  };
}

// What a restart on fewer ranks starts fresh. (Everything else is resharded or whole in the
// checkpoint: the model, the optimizer's state, ZeRO's shards read by the new world's ranks.)
std::vector<Reset> make_resets() {
  return {
      {{{"restart", {"fewer-ranks"}}, {"strategy", {"local-sgd", "gossip"}}},
       "each rank's own model and optimizer state are in the checkpoint for its old world: on "
       "fewer ranks every rank starts from the checkpoint's average model and rank 0's "
       "optimizer state (local SGD's round and DiLoCo's outer state are every rank's alike and "
       "carry on)",
       "start from the checkpoint's average model"},
      {{{"restart", {"fewer-ranks"}}, {"strategy", {"ddp"}},
        {"compression", except(kCompressions, {"none"})}},
       "DDP's compression hook's state belongs to ranks (error feedback's residuals, PowerSGD's "
       "P and Q, the step counts that seed random-k and PowerSGD's start): it starts fresh on "
       "every rank",
       "hook's state starts fresh"},
      {{{"restart", {"fewer-ranks"}}, {"strategy", {"async"}}},
       "the workers' clocks (their push counts, which the staleness bound compares) are in the "
       "checkpoint per worker of the old world: every worker's starts at 0",
       "clocks start at 0"},
  };
}

}  // namespace

const std::vector<Reset>& support_resets() {
  static const std::vector<Reset> resets = make_resets();
  return resets;
}

std::vector<const Reset*> resets_for(const Assignment& values) {
  std::vector<const Reset*> out;
  for (const Reset& r : support_resets()) {
    if (matches(Refusal{r.when, ""}, values)) out.push_back(&r);
  }
  return out;
}

const std::vector<Axis>& support_axes() {
  static const std::vector<Axis> axes = make_axes();
  return axes;
}

const Axis& strategy_axis() { return support_axes().front(); }

const Axis& support_axis(const std::string& name) {
  for (const Axis& a : support_axes()) {
    if (a.name == name) return a;
  }
  TS_INTERNAL_ASSERT(false, "no axis '", name, "' in the support table");
  return support_axes().front();
}

const std::vector<Refusal>& support_refusals() {
  static const std::vector<Refusal> refusals = make_refusals();
  return refusals;
}

Assignment assignment_of(const Config& c) {
  Assignment out;
  for (const Axis& a : support_axes()) out.emplace_back(a.name, a.value_of(c));
  return out;
}

std::string value_in(const Assignment& values, const std::string& axis) {
  for (const auto& [name, value] : values) {
    if (name == axis) return value;
  }
  return "";
}

bool matches(const Refusal& refusal, const Assignment& values) {
  for (const Condition& cond : refusal.when) {
    const std::string v = value_in(values, cond.axis);
    if (v.empty() || std::find(cond.values.begin(), cond.values.end(), v) == cond.values.end()) {
      return false;
    }
  }
  return true;
}

const Refusal* refusal_for(const Assignment& values) {
  for (const Refusal& r : support_refusals()) {
    if (matches(r, values)) return &r;
  }
  return nullptr;
}

bool applies(const Axis& axis, const Assignment& values) {
  if (!axis.applies_when.empty() && !matches(Refusal{axis.applies_when, ""}, values)) return false;
  const Flag* flag = find_flag(axis.flag);
  if (flag == nullptr || flag->strategies.empty()) return true;
  const std::string strategy = value_in(values, "strategy");
  return strategy.empty() || std::find(flag->strategies.begin(), flag->strategies.end(),
                                       strategy) != flag->strategies.end();
}

void check_support(const Config& c) {
  const Refusal* r = refusal_for(assignment_of(c));
  if (r == nullptr) return;
  // "--strategy=zero1 with --compression=fp16 and --amp=fp16: why".
  std::string flags = support_axis(r->when[0].axis).shown(c) + " with ";
  for (size_t i = 1; i < r->when.size(); ++i) {
    flags += (i == 1 ? "" : i + 1 == r->when.size() ? " and " : ", ") +
             support_axis(r->when[i].axis).shown(c);
  }
  bad(flags + ": " + r->why);
}

std::string reference_of(const std::string& strategy) {
  if (strategy == "single") return "itself (the reference of the others)";
  if (strategy == "ddp") return "one process on the N-times batch";
  if (strategy == "zero1" || strategy == "zero2" || strategy == "zero3") return "DDP";
  if (strategy == "pipeline") return "one process (gradient accumulation over the micro-batches)";
  return "its resumed run; one-process simulation in its library tests";
}

}  // namespace train
}  // namespace tessera
