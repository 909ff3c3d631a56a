#include "tools/train/flags.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "dist/compression/make_hook.h"
#include "dist/straggler.h"
#include "dist/trace_recorder.h"
#include "tensor/check.h"
#include "tensor/device.h"
#include "tools/train/fault_injection.h"
#include "tools/train/flag_checks.h"
#include "tools/train/flag_values.h"

namespace tessera {
namespace train {

std::vector<std::pair<std::string, std::string>> settings_that_must_agree(const Config& c) {
  auto number = [](double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", x);
    return std::string(text);
  };
  return {{"model", c.model},
          {"data", c.data},
          {"strategy", c.strategy},
          {"epochs", std::to_string(c.epochs)},
          {"batch-size", std::to_string(c.batch_size)},
          {"lr", number(c.lr)},
          {"optimizer", c.optimizer},
          {"momentum", number(c.momentum)},
          {"weight-decay", number(c.weight_decay)},
          {"schedule", c.schedule},
          {"warmup-epochs", std::to_string(c.warmup_epochs)},
          {"label-smoothing", number(c.label_smoothing)},
          {"augment", std::to_string(c.augment)},
          {"seed", std::to_string(c.seed)},
          {"device type", c.device.substr(0, c.device.find(':'))},
          {"train-limit", std::to_string(c.train_limit)},
          {"synthetic-size", std::to_string(c.synthetic_size)},
          {"checkpointing", c.checkpoint_dir.empty() ? "off" : "on"},
          {"checkpoint-format", c.checkpoint_format},
          {"resume", c.resume},
          {"stages", std::to_string(c.stages)},
          {"micro-batches", std::to_string(c.micro_batches)},
          {"pipeline-schedule", c.pipeline_schedule},
          {"chunks", std::to_string(c.chunks)},
          {"balance", c.balance},
          {"checkpoint-activations", c.checkpoint_activations},
          {"tracing", c.trace.empty() ? "off" : "on"},
          {"trace-steps", c.trace_steps},
          {"dp-strategy", c.dp_strategy},
          {"deferred-batch-norm", c.deferred_batch_norm ? "true" : "false"},
          {"amp", c.amp},
          {"loss-scale", number(c.loss_scale)},
          {"param-dtype", c.param_dtype},
          {"loss-scale-window", std::to_string(c.loss_scale_window)},
          {"loss-scale-hysteresis", std::to_string(c.loss_scale_hysteresis)},
          {"min-loss-scale", number(c.min_loss_scale)},
          {"bucket-cap-mb", number(c.bucket_cap_mb)},
          {"first-bucket-mb", number(c.first_bucket_mb)},
          {"compression", c.compression},
          {"error-feedback", c.error_feedback},
          {"gossip-topology", c.gossip_topology},
          {"servers", std::to_string(c.servers)},
          {"staleness-bound", std::to_string(c.staleness_bound)},
          {"staleness-aware-lr", c.staleness_aware_lr ? "true" : "false"},
          {"batch-assignment", c.batch_assignment},
          {"straggler", c.straggler},
          {"inject-fault", c.inject_fault},
          {"collectives", c.collectives},
          {"ranks-per-node", std::to_string(c.ranks_per_node)},
          {"inter-node-latency-us", number(c.inter_node_latency_us)},
          {"inter-node-bandwidth-gbps", number(c.inter_node_bandwidth_gbps)},
          {"sync-period", std::to_string(c.sync_period)},
          {"local-sgd-warmup", std::to_string(c.local_sgd_warmup)},
          {"outer-optimizer", c.outer_optimizer},
          {"outer-lr", number(c.outer_lr)},
          {"outer-momentum", number(c.outer_momentum)},
          {"powersgd-start-iter", std::to_string(c.powersgd_start_iter)},
          {"net-latency-us", number(c.net_latency_us)},
          {"net-bandwidth-gbps", number(c.net_bandwidth_gbps)},
          {"zero3-wrap", c.zero3_wrap_layers ? "layer" : std::to_string(c.zero3_min_params)},
          {"zero3-prefetch", c.zero3_prefetch ? "true" : "false"},
          {"tensor-parallel", std::to_string(c.tensor_parallel)},
          {"tp-head", c.tp_head ? "true" : "false"},
          {"num-classes", std::to_string(c.num_classes)}};
}

std::string sharded_checkpoint_dir(const std::string& checkpoint_dir) {
  return checkpoint_dir + (checkpoint_dir.back() == '/' ? "" : "/") + "last-sharded";
}

std::string resume_file(const std::string& resume) {
  struct stat st;
  TS_CHECK(::stat(resume.c_str(), &st) == 0, "train: --resume=", resume, ": no such file or "
           "directory");
  if (!S_ISDIR(st.st_mode)) return resume;
  const auto is_file = [&st](const std::string& path) {
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  const std::string dir = resume + (resume.back() == '/' ? "" : "/");
  if (is_file(dir + "index.safetensors")) return resume;  // a sharded checkpoint itself
  if (is_file(dir + "last.safetensors")) return dir + "last.safetensors";
  if (is_file(sharded_checkpoint_dir(resume) + "/index.safetensors")) {
    return sharded_checkpoint_dir(resume);
  }
  TS_FAIL("train: --resume=", resume, " is a directory without last.safetensors, "
          "last-sharded/index.safetensors or index.safetensors (give the checkpoint file, a "
          "sharded checkpoint's directory, or the --checkpoint-dir of a run)");
}

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

Config parse_flags(int argc, char** argv) {
  Config c;
  using Setter = std::function<void(const std::string&)>;
  const std::map<std::string, Setter> setters = {
      {"model", [&](const std::string& v) {
         c.model = one_of("model", v, {"logistic", "mlp", "resnet20", "resnet32", "resnet56",
                                       "resnet18", "resnet34", "resnet50"});
       }},
      {"data", [&](const std::string& v) { c.data = one_of("data", v, {"fashion-mnist", "synthetic"}); }},
      {"data-dir", [&](const std::string& v) { c.data_dir = v; }},
      {"strategy", [&](const std::string& v) { c.strategy = one_of("strategy", v, {"single", "ddp", "zero1", "zero2", "zero3", "pipeline", "gossip", "local-sgd", "async"}); }},
      {"epochs", [&](const std::string& v) { c.epochs = to_int("epochs", v, 1); }},
      {"batch-size", [&](const std::string& v) { c.batch_size = to_int("batch-size", v, 1); }},
      {"lr", [&](const std::string& v) {
         c.lr = to_double("lr", v, 0);
         if (c.lr == 0) bad("--lr must be positive");
       }},
      {"optimizer", [&](const std::string& v) { c.optimizer = one_of("optimizer", v, {"sgd", "adam", "adamw"}); }},
      {"momentum", [&](const std::string& v) { c.momentum = to_double("momentum", v, 0); }},
      {"weight-decay", [&](const std::string& v) { c.weight_decay = to_double("weight-decay", v, 0); }},
      {"schedule", [&](const std::string& v) {
         if (v == "gpipe" || v == "1f1b" || v == "interleaved") {
           bad("--schedule is the learning-rate schedule (constant|step|cosine); the pipeline's is "
               "--pipeline-schedule=" + v);
         }
         c.schedule = one_of("schedule", v, {"constant", "step", "cosine"});
       }},
      {"warmup-epochs", [&](const std::string& v) { c.warmup_epochs = to_int("warmup-epochs", v, 0); }},
      {"label-smoothing", [&](const std::string& v) {
         c.label_smoothing = to_double("label-smoothing", v, 0);
         if (c.label_smoothing > 1) bad("--label-smoothing must be in [0, 1], got '" + v + "'");
       }},
      {"augment", [&](const std::string& v) { c.augment = to_bool("augment", v) ? 1 : 0; }},
      {"seed", [&](const std::string& v) { c.seed = static_cast<uint64_t>(to_int("seed", v, 0)); }},
      {"threads", [&](const std::string& v) { c.threads = to_int32("threads", v, 1); }},
      {"device", [&](const std::string& v) {
         if (v != "cpu" && v != "cuda" && v.rfind("cuda:", 0) != 0) {
           bad("--device must be cpu, cuda or cuda:N, got '" + v + "'");
         }
         try {
           Device::parse(v);
         } catch (const std::exception& e) {
           bad("--device: " + std::string(e.what()));
         }
         c.device = v;
       }},
      {"train-limit", [&](const std::string& v) { c.train_limit = to_int("train-limit", v, 1); }},
      {"synthetic-size", [&](const std::string& v) { c.synthetic_size = to_int("synthetic-size", v, 1); }},
      {"checkpoint-dir", [&](const std::string& v) {
         if (v.empty()) bad("--checkpoint-dir needs a directory, got an empty value");
         c.checkpoint_dir = v;
       }},
      {"checkpoint-format", [&](const std::string& v) {
         c.checkpoint_format = one_of("checkpoint-format", v, {"full", "sharded"});
       }},
      {"resume", [&](const std::string& v) {
         // Empty would silently start afresh and then overwrite the checkpoint directory.
         if (v.empty()) bad("--resume needs a checkpoint file or directory, got an empty value");
         c.resume = v;
       }},
      {"metrics", [&](const std::string& v) {
         if (v.empty()) bad("--metrics needs a file name, got an empty value");
         c.metrics = v;
       }},
      {"stages", [&](const std::string& v) { c.stages = to_int32("stages", v, 1); }},
      {"micro-batches", [&](const std::string& v) {
         c.micro_batches = to_int32("micro-batches", v, 1);
       }},
      {"pipeline-schedule", [&](const std::string& v) {
         c.pipeline_schedule = one_of("pipeline-schedule", v, {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2"});
       }},
      {"chunks", [&](const std::string& v) { c.chunks = to_int32("chunks", v, 1); }},
      {"balance", [&](const std::string& v) { c.balance = to_balance(v); }},
      {"checkpoint-activations", [&](const std::string& v) {
         c.checkpoint_activations =
             one_of("checkpoint-activations", v, {"never", "except_last", "always"});
       }},
      {"deferred-batch-norm", [&](const std::string& v) {
         c.deferred_batch_norm = to_bool("deferred-batch-norm", v);
       }},
      {"dp-strategy", [&](const std::string& v) {
         c.dp_strategy = one_of("dp-strategy", v, {"ddp", "zero1", "zero2"});
       }},
      {"trace", [&](const std::string& v) {
         if (v.empty()) bad("--trace needs a file name, got an empty value");
         c.trace = v;
       }},
      {"trace-steps", [&](const std::string& v) {
         try {
           dist::trace::TraceSteps::parse(v);
         } catch (const Error& e) {
           bad(e.message());
         }
         c.trace_steps = v;
       }},
      {"compression", [&](const std::string& v) {
         try {
           dist::compression::parse_compression(v);
         } catch (const Error& e) {
           bad("--compression: " + e.message());
         }
         c.compression = v;
       }},
      {"powersgd-start-iter", [&](const std::string& v) {
         c.powersgd_start_iter = to_int("powersgd-start-iter", v, 2);
       }},
      {"straggler", [&](const std::string& v) {
         try {
           dist::StragglerEmulation::parse(v);
         } catch (const Error& e) {
           bad("--straggler: " + e.message());
         }
         c.straggler = v;
       }},
      {"collectives", [&](const std::string& v) {
         c.collectives = one_of("collectives", v, {"flat", "hierarchical"});
       }},
      {"ranks-per-node", [&](const std::string& v) { c.ranks_per_node = to_int32("ranks-per-node", v, 1); }},
      {"inter-node-latency-us", [&](const std::string& v) {
         c.inter_node_latency_us = to_double("inter-node-latency-us", v, 0);
       }},
      {"inter-node-bandwidth-gbps", [&](const std::string& v) {
         c.inter_node_bandwidth_gbps = to_double("inter-node-bandwidth-gbps", v, 0);
         if (c.inter_node_bandwidth_gbps == 0) bad("--inter-node-bandwidth-gbps must be positive, got '" + v + "'");
       }},
      {"collective-timeout", [&](const std::string& v) {
         c.collective_timeout = to_double("collective-timeout", v, 0);
       }},
      {"inject-fault", [&](const std::string& v) {
         try {
           FaultInjection::parse(v);
         } catch (const Error& e) {
           bad("--inject-fault: " + e.message());
         }
         c.inject_fault = v;
       }},
      {"sync-period", [&](const std::string& v) { c.sync_period = to_int("sync-period", v, 1); }},
      {"local-sgd-warmup", [&](const std::string& v) { c.local_sgd_warmup = to_int("local-sgd-warmup", v, 0); }},
      {"outer-optimizer", [&](const std::string& v) {
         c.outer_optimizer = one_of("outer-optimizer", v, {"none", "nesterov"});
       }},
      {"outer-lr", [&](const std::string& v) {
         c.outer_lr = to_double("outer-lr", v, 0);
         if (c.outer_lr == 0) bad("--outer-lr must be positive, got '" + v + "'");
       }},
      {"outer-momentum", [&](const std::string& v) { c.outer_momentum = to_double("outer-momentum", v, 0); }},
      {"servers", [&](const std::string& v) { c.servers = to_int32("servers", v, 1); }},
      {"staleness-bound", [&](const std::string& v) {
         c.staleness_bound = v == "none" ? -1 : to_int("staleness-bound", v, 0);
       }},
      {"staleness-aware-lr", [&](const std::string& v) {
         c.staleness_aware_lr = to_bool("staleness-aware-lr", v);
       }},
      {"batch-assignment", [&](const std::string& v) {
         c.batch_assignment = one_of("batch-assignment", v, {"shard", "shared"});
       }},
      {"gossip-topology", [&](const std::string& v) {
         c.gossip_topology = one_of("gossip-topology", v, {"ring", "exponential"});
       }},
      {"error-feedback", [&](const std::string& v) {
         c.error_feedback = one_of("error-feedback", v, {"true", "false"});
       }},
      {"net-latency-us", [&](const std::string& v) { c.net_latency_us = to_double("net-latency-us", v, 0); }},
      {"net-bandwidth-gbps", [&](const std::string& v) {
         c.net_bandwidth_gbps = to_double("net-bandwidth-gbps", v, 0);
         if (c.net_bandwidth_gbps == 0) bad("--net-bandwidth-gbps must be positive, got '" + v + "'");
       }},
      {"bucket-cap-mb", [&](const std::string& v) {
         c.bucket_cap_mb = to_double("bucket-cap-mb", v, 0);
         if (c.bucket_cap_mb == 0) bad("--bucket-cap-mb must be positive, got '" + v + "'");
       }},
      {"first-bucket-mb", [&](const std::string& v) {
         c.first_bucket_mb = to_double("first-bucket-mb", v, 0);
         if (c.first_bucket_mb == 0) bad("--first-bucket-mb must be positive, got '" + v + "'");
       }},
      {"zero3-wrap", [&](const std::string& v) {
         if (v == "block") {
           c.zero3_min_params = 1;
         } else if (v.rfind("params:", 0) == 0) {
           c.zero3_min_params = to_int("zero3-wrap", v.substr(7), 1);
         } else if (v == "layer") {
           c.zero3_wrap_layers = true;
         } else {
           bad("--zero3-wrap must be block, layer or params:N (N >= 1), got '" + v + "'");
         }
       }},
      {"zero3-prefetch", [&](const std::string& v) { c.zero3_prefetch = to_bool("zero3-prefetch", v); }},
      {"tensor-parallel", [&](const std::string& v) {
         c.tensor_parallel = to_int32("tensor-parallel", v, 1);
       }},
      {"tp-head", [&](const std::string& v) { c.tp_head = to_bool("tp-head", v); }},
      {"num-classes", [&](const std::string& v) { c.num_classes = to_int("num-classes", v, 2); }},
      {"amp", [&](const std::string& v) { c.amp = one_of("amp", v, {"off", "fp16", "bf16"}); }},
      {"param-dtype", [&](const std::string& v) {
         c.param_dtype = one_of("param-dtype", v, {"f32", "f16", "bf16"});
       }},
      {"loss-scale-window", [&](const std::string& v) {
         c.loss_scale_window = to_int("loss-scale-window", v, 1);
       }},
      {"loss-scale-hysteresis", [&](const std::string& v) {
         c.loss_scale_hysteresis = to_int("loss-scale-hysteresis", v, 1);
       }},
      {"min-loss-scale", [&](const std::string& v) {
         c.min_loss_scale = to_double("min-loss-scale", v, 0);
       }},
      {"loss-scale", [&](const std::string& v) {
         if (v != "dynamic") {
           c.loss_scale = to_double("loss-scale", v, 0);
           if (c.loss_scale < 1) bad("--loss-scale expects dynamic or a number >= 1, got '" + v + "'");
         }
       }},
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s", usage().c_str());
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) bad("unexpected argument '" + arg + "'");
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto it = setters.find(name);
    if (it == setters.end() && name == "checkpoint") {
      bad("unknown flag --checkpoint (activation checkpointing: --checkpoint-activations; "
          "checkpoint files: --checkpoint-dir)");
    }
    if (it == setters.end()) bad("unknown flag --" + name);
    if (eq == std::string::npos) bad("--" + name + " needs a value (--" + name + "=VALUE)");
    it->second(arg.substr(eq + 1));
    c.given.insert(name);
  }
  apply_model_defaults(c);
  check_combinations(c);
  return c;
}

void apply_model_defaults(Config& c) {
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
  if (c.tensor_parallel > 1 && c.model != "mlp" && c.given.count("tp-head") == 0) c.tp_head = true;
  if (c.warmup_epochs >= c.epochs) {
    bad("--warmup-epochs (" + std::to_string(c.warmup_epochs) + ") must be less than --epochs (" +
        std::to_string(c.epochs) + ")");
  }
}

}  // namespace train
}  // namespace tessera
