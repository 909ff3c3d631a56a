// The support table's axes and its queries (support_table.h says how they are read); the
// refusals and resets are support_refusals.cc's.
#include "tools/train/support_table.h"

#include <algorithm>

#include "tensor/check.h"
#include "tools/train/flag_table.h"
#include "tools/train/flag_values.h"
#include "tools/train/support_values.h"

namespace tessera {
namespace train {

namespace {

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
  // The GPT: gpt-tiny with 4 heads of 8, so that DeepSpeed-Ulysses's 2 context-parallel ranks
  // split the heads each of 2 tensor-parallel ranks holds.
  model.flags_for = [](const std::string& v) {
    if (v == "transformer") {
      return std::string("--model=gpt-tiny --n-head=4 --tokenizer=byte --seq-len=16");
    }
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

  // How context parallelism's attention reaches the other ranks' tokens: the ring, or
  // DeepSpeed-Ulysses's all-to-alls.
  Axis cp_algorithm = flag_axis("context-parallel-algorithm", {"ring", "ulysses"},
                                &Config::context_parallel_algorithm);
  cp_algorithm.applies_when = {{"context-parallel", {"on"}}, {"model", {"transformer"}}};
  axes.push_back(cp_algorithm);

  Axis collectives = flag_axis("collectives", {"flat", "hierarchical"}, &Config::collectives);
  collectives.flags_for = [](const std::string& v) {
    return v == "flat" ? std::string() : std::string("--collectives=hierarchical --ranks-per-node=1");
  };
  axes.push_back(collectives);

  // ZeRO's optimizer state offloaded, and with "all" ZeRO-3's parameter and gradient shards too
  // (dist/zero/offload/): the generated runs keep them on disk.
  Axis offload = flag_axis("offload", {"none", "optimizer", "all"}, &Config::offload);
  offload.flags_for = [](const std::string& v) {
    return v == "none" ? std::string() : "--offload=" + v + " --offload-dir=/tmp/tessera_offload";
  };
  axes.push_back(offload);

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
