// The rules between flags, grouped by topic as the flag table is; each names every flag it
// relates and the values given. When each stage runs: flag_rules.h.
#include "tools/train/flag_rules.h"

#include <string>

#include "dist/straggler.h"
#include "models/gpt.h"
#include "tools/train/fault_injection.h"
#include "tools/train/flag_table.h"
#include "tools/train/restart_count.h"
#include "tools/train/support_table.h"

namespace tessera {
namespace train {

void check_combinations(const Config& c) {
  // The model and its data: a GPT reads text, the others images.
  if (language_model(c)) {
    if (c.data != "text") {
      bad("--model=" + c.model + " is a language model: it trains on --data=text[:FILE], not "
          "--data=" + c.data);
    }
    if (c.seq_len > gpt_context(c)) {
      bad("--seq-len=" + std::to_string(c.seq_len) + " is longer than --model=" + c.model +
          "'s context of " + std::to_string(gpt_context(c)) + " positions");
    }
    if (c.given.count("recompute-modules") != 0 && c.recompute != "selective") {
      bad("--recompute-modules=" + c.recompute_modules + " chooses --recompute=selective's ops; "
          "this run has --recompute=" + c.recompute);
    }
    try {
      models::Recompute::parse(c.recompute, c.recompute_modules);
    } catch (const std::exception& e) {
      bad(std::string("--recompute-modules: ") + e.what());
    }
    for (const char* flag : {"label-smoothing", "augment", "num-classes", "synthetic-size"}) {
      if (c.given.count(flag) != 0) {
        bad(std::string("--") + flag + " is for the image models, not --model=" + c.model);
      }
    }
  } else {
    if (c.data == "text") {
      bad("--data=text is for the language models (--model=gpt-tiny|gpt-nano|gpt2), not --model=" +
          c.model);
    }
    for (const char* flag : {"tokenizer", "seq-len", "val-limit", "eval-every", "sample",
                             "context", "recompute", "recompute-modules"}) {
      if (c.given.count(flag) != 0) {
        bad(std::string("--") + flag + " is for the language models (--model=gpt-tiny|gpt-nano|"
            "gpt2), not --model=" + c.model);
      }
    }
  }

  // Offload: the disk tier needs its directory.
  if (c.offload != "none" && c.offload_tier == "disk" && c.offload_dir.empty()) {
    bad("--offload=" + c.offload + " keeps the state on disk: give --offload-dir=DIR (or "
        "--offload-tier=host)");
  }

  // The optimization.
  if (c.warmup_epochs >= c.epochs) {
    bad("--warmup-epochs (" + std::to_string(c.warmup_epochs) + ") must be less than --epochs (" +
        std::to_string(c.epochs) + ")");
  }
  if (c.given.count("trace-steps") != 0 && c.trace.empty()) {
    bad("--trace-steps=" + c.trace_steps +
        " selects the steps --trace=FILE records: give --trace too");
  }

  // The pipeline.
  if (c.chunks > 1 && c.pipeline_schedule != "interleaved") {
    bad("--chunks=" + std::to_string(c.chunks) +
        " needs --pipeline-schedule=interleaved (got --pipeline-schedule=" + c.pipeline_schedule +
        ", one chunk per rank)");
  }
  if (c.pipeline_schedule == "interleaved" && c.batch_size < c.micro_batches) {
    bad("--pipeline-schedule=interleaved needs --batch-size (" + std::to_string(c.batch_size) +
        ") of at least --micro-batches (" + std::to_string(c.micro_batches) +
        "): a smaller batch gives fewer micro-batches than the schedule runs");
  }
  // The table lets --bucket-cap-mb through with --strategy=pipeline; only ZeRO-2 stages bucket.
  if (c.given.count("bucket-cap-mb") != 0 && c.strategy == "pipeline" && c.dp_strategy != "zero2") {
    bad("--bucket-cap-mb " + find_flag("bucket-cap-mb")->strategy_why +
        " (got --strategy=pipeline --dp-strategy=" + c.dp_strategy + ")");
  }

  // Compression.
  if (c.given.count("powersgd-start-iter") != 0 && c.compression.rfind("powersgd:", 0) != 0) {
    bad("--powersgd-start-iter needs --compression=powersgd:RANK (got " + c.compression + ")");
  }
  if (c.given.count("error-feedback") != 0 && c.compression == "none") {
    bad("--error-feedback needs --compression (got none)");
  }

  // Local SGD, asynchronous SGD, the emulated straggler.
  for (const char* flag : {"outer-lr", "outer-momentum"}) {
    if (c.given.count(flag) != 0 && c.outer_optimizer != "nesterov") {
      bad(std::string("--") + flag + " is DiLoCo's: it needs --outer-optimizer=nesterov");
    }
  }
  if (!c.straggler.empty() && c.strategy == "single" && c.tensor_parallel == 1 &&
      dist::StragglerEmulation::parse(c.straggler).rank() != 0) {
    bad("--straggler=" + c.straggler + " names a rank other than 0, but --strategy=single runs "
        "one process");
  }
  if (c.batch_assignment == "shared" && c.staleness_bound >= 0) {
    bad("--batch-assignment=shared with --staleness-bound=" + std::to_string(c.staleness_bound) +
        ": a bound keeps every worker within that many iterations of the slowest over the whole "
        "run, so a fast worker could not take a straggler's batches; use --staleness-bound=none");
  }

  // Hierarchical collectives.
  for (const char* flag : {"ranks-per-node", "inter-node-latency-us", "inter-node-bandwidth-gbps"}) {
    if (c.given.count(flag) != 0 && c.collectives != "hierarchical") {
      bad(std::string("--") + flag + " needs --collectives=hierarchical");
    }
  }

  // Context parallelism (its strategies and models: the support table).
  if (c.context_parallel > 1 && language_model(c) && c.seq_len % (2 * c.context_parallel) != 0) {
    bad("--seq-len=" + std::to_string(c.seq_len) + " does not divide into 2 x --context-parallel=" +
        std::to_string(c.context_parallel) + " = " + std::to_string(2 * c.context_parallel) +
        " equal chunks (each rank holds two: the head-tail order)");
  }
  if (c.context_parallel > 1 && c.sequence_parallel && c.tensor_parallel > 1 && language_model(c) &&
      c.seq_len % (c.context_parallel * c.tensor_parallel) != 0) {
    bad("--sequence-parallel with --tensor-parallel=" + std::to_string(c.tensor_parallel) +
        " and --context-parallel=" + std::to_string(c.context_parallel) + ": a rank's " +
        "seq-len / C tokens do not divide by T (--seq-len=" + std::to_string(c.seq_len) +
        " does not divide by C x T = " + std::to_string(c.context_parallel * c.tensor_parallel) +
        ")");
  }
  for (const char* flag : {"n-layer", "n-head", "n-embd"}) {
    if (c.given.count(flag) != 0 && !language_model(c)) {
      bad(std::string("--") + flag + " is a GPT's (--model=gpt-*), not --model=" + c.model + "'s");
    }
  }
  if (language_model(c) && gpt_config(c, 256).n_embd % gpt_config(c, 256).n_head != 0) {
    bad("a GPT's width (" + std::to_string(gpt_config(c, 256).n_embd) + ", --n-embd) does not "
        "divide into its " + std::to_string(gpt_config(c, 256).n_head) + " heads (--n-head)");
  }
  if (c.context_parallel_algorithm == "ulysses" && c.context_parallel > 1 && language_model(c) &&
      (gpt_heads(c) / c.tensor_parallel) % c.context_parallel != 0) {
    bad("--context-parallel-algorithm=ulysses splits a rank's attention heads over the "
        "context-parallel ranks: --model=" + c.model + "'s " + std::to_string(gpt_heads(c)) +
        " heads" + (c.tensor_parallel > 1 ? " / --tensor-parallel=" + std::to_string(c.tensor_parallel) : "") +
        " = " + std::to_string(gpt_heads(c) / c.tensor_parallel) + " do not divide by --context-parallel=" +
        std::to_string(c.context_parallel) + " (use the ring)");
  }
  if (c.given.count("context-parallel-algorithm") != 0 && c.context_parallel == 1) {
    bad("--context-parallel-algorithm needs --context-parallel of 2 or more (got 1)");
  }
  if (c.context_parallel > 1 && c.sample > 0) {
    bad("--sample=" + std::to_string(c.sample) + " with --context-parallel=" +
        std::to_string(c.context_parallel) + ": sampling runs the model on prefixes of every "
        "length, which do not divide into 2C chunks; sample from the saved model (--save-model) "
        "without --context-parallel");
  }

  // Tensor parallelism.
  if (c.tensor_parallel > 1 && c.strategy == "pipeline" && c.balance == "time") {
    // Each rank times its own layers; ranks of one stage's tensor-parallel group could then cut
    // the model differently (Pipe agrees on a balance over the pipeline and data-parallel
    // groups only).
    bad("--balance=time with --tensor-parallel: choose uniform, params or an explicit list");
  }
  if (c.given.count("tp-head") != 0 && c.tensor_parallel == 1) {
    bad("--tp-head needs --tensor-parallel of 2 or more (got 1)");
  }
  if (c.given.count("tp-head") != 0 && language_model(c)) {
    bad("--tp-head is for the MLP and the image models' classifiers: --tensor-parallel splits a "
        "GPT's blocks (attention heads and MLP) and its vocabulary (embedding, tied lm_head and "
        "loss) always");
  }
  if (c.tensor_parallel > 1 && language_model(c) && gpt_heads(c) % c.tensor_parallel != 0) {
    bad("--tensor-parallel=" + std::to_string(c.tensor_parallel) + " does not divide --model=" +
        c.model + "'s " + std::to_string(gpt_heads(c)) + " attention heads (Megatron splits them "
        "over the tensor-parallel ranks)");
  }
  if (c.sequence_parallel && c.tensor_parallel > 1 && language_model(c) &&
      c.seq_len % c.tensor_parallel != 0) {
    bad("--sequence-parallel with --tensor-parallel=" + std::to_string(c.tensor_parallel) +
        ": --seq-len=" + std::to_string(c.seq_len) + " does not divide by " +
        std::to_string(c.tensor_parallel) + " (each rank holds seq-len / T tokens)");
  }
  if (c.given.count("tp-head") != 0 && !c.tp_head && c.model != "mlp") {
    bad("--tp-head=false: --model=" + c.model + " has no other layer to split than its classifier "
        "(only --model=mlp splits its hidden layers instead)");
  }
  if (c.given.count("num-classes") != 0 && c.data != "synthetic") {
    bad("--num-classes is for --data=synthetic (" + c.data + " has 10 classes)");
  }

  // Mixed precision. Loss scaling runs for f16 arithmetic: fp16 autocast or f16 parameters.
  const bool scaled = c.amp == "fp16" || c.param_dtype == "f16";
  for (const char* flag : {"loss-scale", "loss-scale-window", "loss-scale-hysteresis",
                           "min-loss-scale"}) {
    if (c.given.count(flag) != 0 && !scaled) {
      bad(std::string("--") + flag + " needs --amp=fp16 or --param-dtype=f16 (got --amp=" + c.amp +
          " --param-dtype=" + c.param_dtype +
          (c.amp == "bf16" ? ": bf16 has f32's range and is not loss-scaled)" : ")"));
    }
  }

  // What combines with what: the support table (strategies x precision, compression,
  // checkpoints, tensor parallelism, the pipeline, hierarchical collectives).
  check_support(c);
}

std::string check_against_world(const Config& c, int world_size) {
  if (c.context_parallel > 1) {
    // A replica's ranks: T tensor-parallel x C context-parallel (dist::Topology).
    const int unit = c.tensor_parallel * c.context_parallel;
    const std::string cp = "--context-parallel=" + std::to_string(c.context_parallel);
    const std::string layout =
        c.tensor_parallel > 1
            ? "--tensor-parallel=" + std::to_string(c.tensor_parallel) + " x " + cp + " = " +
                  std::to_string(unit)
            : cp;
    if (world_size % unit != 0) {
      return layout + " does not divide the " + std::to_string(world_size) +
             " ranks (mpirun -np): the ranks are " +
             (c.tensor_parallel > 1 ? "T tensor-parallel x C context-parallel x N/(T C)"
                                    : "C context-parallel x N/C") +
             " data-parallel replicas";
    }
    if (c.strategy == "single" && world_size != unit) {
      return layout + " on " + std::to_string(world_size) + " ranks makes " +
             std::to_string(world_size / unit) +
             " data-parallel replicas: choose --strategy=ddp, zero1 or zero2 for them "
             "(--strategy=single needs exactly " + std::to_string(unit) + " ranks)";
    }
  }
  if (c.tensor_parallel > 1) {
    const std::string t = "--tensor-parallel=" + std::to_string(c.tensor_parallel);
    if (world_size % c.tensor_parallel != 0) {
      return t + " does not divide the " + std::to_string(world_size) +
             " ranks (mpirun -np): the ranks are T tensor-parallel x N/T data-parallel replicas";
    }
    if (c.tp_head && c.num_classes < c.tensor_parallel) {
      return t + " splits the classifier by class, but there are only " +
             std::to_string(c.num_classes) + " classes (--num-classes)";
    }
    if (c.strategy == "single" && c.context_parallel == 1 && world_size != c.tensor_parallel) {
      return t + " on " + std::to_string(world_size) + " ranks makes " +
             std::to_string(world_size / c.tensor_parallel) +
             " data-parallel replicas: choose --strategy=ddp or zero1 for them (--strategy=single "
             "needs exactly " + std::to_string(c.tensor_parallel) + " ranks)";
    }
  }
  // (Not on a restart under tools/launch, which may run on fewer ranks: the emulated straggler
  // is then simply not among them.)
  if (!c.straggler.empty() && restart_count().value_or(0) == 0 &&
      dist::StragglerEmulation::parse(c.straggler).rank() >= world_size) {
    return "--straggler=" + c.straggler + " names rank " +
           std::to_string(dist::StragglerEmulation::parse(c.straggler).rank()) + ", but there are " +
           std::to_string(world_size) + " ranks";
  }
  if (c.collectives == "hierarchical" && c.ranks_per_node > 0 && world_size % c.ranks_per_node != 0) {
    return "--ranks-per-node=" + std::to_string(c.ranks_per_node) + " does not divide the " +
           std::to_string(world_size) + " ranks";
  }
  if (c.strategy == "async") {
    if (world_size <= c.servers) {
      return "--servers=" + std::to_string(c.servers) + " on " + std::to_string(world_size) +
             " ranks leaves no worker: asynchronous SGD needs at least servers + 1 ranks "
             "(mpirun -np)";
    }
    if (!c.straggler.empty() && dist::StragglerEmulation::parse(c.straggler).rank() < c.servers) {
      return "--straggler=" + c.straggler + " names a parameter server (ranks 0.." +
             std::to_string(c.servers - 1) + " serve): choose a worker rank, " +
             std::to_string(c.servers) + " or above";
    }
  }
  // (Not on a restart under tools/launch: the fault fires on the first attempt only, and a
  // restart may run on fewer ranks.)
  if (!c.inject_fault.empty() && restart_count().value_or(0) == 0 &&
      FaultInjection::parse(c.inject_fault).rank() >= world_size) {
    return "--inject-fault=" + c.inject_fault + " names rank " +
           std::to_string(FaultInjection::parse(c.inject_fault).rank()) + ", but there are " +
           std::to_string(world_size) + " ranks";
  }
  if (c.strategy != "pipeline") return "";
  const int t = c.tensor_parallel, cp = c.context_parallel;
  const int k = pipeline_stages(c, world_size / (t * cp));
  const std::string stages = "--stages=" + std::to_string(k);
  if (world_size % (k * t * cp) != 0) {
    if (cp > 1) {
      return stages + " x --context-parallel=" + std::to_string(cp) +
             (t > 1 ? " x --tensor-parallel=" + std::to_string(t) : std::string()) +
             " does not divide the " + std::to_string(world_size) + " ranks (mpirun -np): the "
             "ranks are K stages x C context-parallel" + (t > 1 ? " x T tensor-parallel" : "") +
             " x a whole number of data-parallel replicas";
    }
    return t > 1 ? stages + " x --tensor-parallel=" + std::to_string(t) + " does not divide the " +
                       std::to_string(world_size) + " ranks (mpirun -np): the ranks are K stages x "
                       "T tensor-parallel x N/(K T) data-parallel replicas"
                 : stages + " does not divide the " + std::to_string(world_size) +
                       " ranks (mpirun -np): the ranks are K stages x N/K data-parallel replicas";
  }
  if (c.pipeline_schedule == "interleaved" && c.micro_batches % k != 0) {
    return "--pipeline-schedule=interleaved needs --micro-batches (" +
           std::to_string(c.micro_batches) + ") to be a multiple of " + stages;
  }
  return "";
}

std::string one_rank_warning(const Config& c, int world_size, bool launched) {
  if (world_size != 1 || c.strategy == "single") return "";
  return "warning: --strategy=" + c.strategy + " is running on 1 rank (" +
         (launched ? "the one rank mpirun or srun started" : "not started by mpirun") +
         "): it trains as one process would, with no other rank to share the work. For N ranks: "
         "mpirun -np N bazel-bin/tools/train ..., or bazel-bin/tools/launch -- mpirun -np N "
         "bazel-bin/tools/train ... to restart after a failure";
}

}  // namespace train
}  // namespace tessera
