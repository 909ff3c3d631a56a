// The train tool's flags: the Config they fill, parsing, per-model defaults. Each flag is one
// row of the flag table (flag_table.h), from which parsing, --help and the settings every rank
// must share are derived; the rules relating several flags are in flag_rules.h.
//
// Hand-written rather than CLI11 (Debian's 2.1): CLI11 would replace the splitting of
// --name=value and flag_values.cc's conversions, about 170 of the 2,267 lines of flag code. The
// rest stays whatever parses: the table (its help text most of its 538 lines) is what the
// support table, the composition test, the ranks' agreement check and docs/COMPOSITION.md read;
// the rules between flags (flag_rules.cc), the help per family, and the closest-name suggestions
// (closest_name.h; CLI11 2.1 suggests none) are tessera's own. Feeding every row to CLI11's
// add_option would take about as many lines as it removes.
#pragma once

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/gpt.h"

namespace tessera {
namespace train {

// What the flags chose: a field per flag (two for --zero3-wrap), written by the flag's row of
// the table (flag_table_*.cc), defaults here.
struct Config {
  // logistic|mlp|resnet20|resnet32|resnet56|resnet18|resnet34|resnet50|gpt-tiny|gpt-nano|gpt2
  std::string model = "logistic";
  std::string data = "fashion-mnist";  // fashion-mnist|synthetic|text (the GPTs' default)
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string strategy = "single";  // single|ddp|zero1|zero2|zero3|pipeline|gossip|local-sgd|async
  int64_t epochs = 0;      // 0: the model's default
  int64_t batch_size = 0;  // 0: the model's default
  double lr = 0;           // 0: the model's default
  std::string optimizer;   // sgd|adam|adamw; empty: the model's default
  double momentum = 0.9;
  double weight_decay = -1;  // < 0: the model's default
  std::string schedule;      // constant|step|cosine; empty: the model's default
  int64_t warmup_epochs = 0;
  double label_smoothing = 0;
  int augment = -1;  // -1: the model's default (on for ResNets)
  uint64_t seed = 0;
  int threads = 0;  // 0: leave as is ($TESSERA_NUM_THREADS or all cores)
  // "cpu", "cuda" (rank r uses GPU r mod the GPU count) or "cuda:N".
  std::string device = "cpu";
  int64_t train_limit = 0;  // use only the first N training examples (0: all)
  // The GPTs' text (--data=text[:FILE]): the file (empty: the fortunes corpus), its tokenizer,
  // the window length T (0: the model's default), the validation windows evaluated (0: all),
  // an evaluation every N steps besides each epoch's (0: none), and the tokens sampled at the end.
  std::string text_file;
  std::string tokenizer = "gpt2";
  int64_t seq_len = 0;
  int64_t context = 0;                         // a GPT's positions; 0: the model's
  // A GPT's shape over the named config's (nanoGPT's names); 0: the model's.
  int64_t n_layer = 0, n_head = 0, n_embd = 0;
  std::string recompute = "none";              // none|selective|full: models::Recompute
  std::string recompute_modules = "core_attn";  // selective's ops
  int64_t val_limit = 256;
  int64_t eval_every = 0;
  int64_t sample = 0;
  double clip_grad_norm = 0;  // the gradients' global 2-norm is clipped to this (0: off)
  int64_t synthetic_size = 10000;
  std::string checkpoint_dir;
  // Each save in a directory of its own, DIR/step-NNNNNNNN/ (dist/checkpoint.h). full: its
  // checkpoint.safetensors, the whole model and optimizer gathered on rank 0; sharded
  // (ZeRO-1/2/3): every rank its shard and rank 0 the index.
  std::string checkpoint_format = "full";
  std::string resume;
  std::string save_model;  // the trained model's weights, written once training ends
  std::string metrics;
  // --report: rank 0 writes one HTML page of the run when it ends (run_page.h).
  std::string report;

  // --strategy=pipeline (pipeline::PipeOptions).
  int stages = 0;  // 0: the world size
  int micro_batches = 4;
  std::string pipeline_schedule = "1f1b";        // gpipe|1f1b|interleaved|zb-h1|zb-h2
  int chunks = 1;                                // model chunks per rank (interleaved)
  std::string balance = "uniform";               // uniform|params|time|3,4,3
  std::string checkpoint_activations = "never";  // never|except_last|always
  std::string trace;          // --trace: Chrome trace of the selected steps, every rank's (rank 0 writes)
  std::string trace_steps = "last";  // --trace-steps: FIRST:LAST, STEP or last
  std::string dp_strategy = "ddp";               // ddp|zero1|zero2: each stage's data parallelism
  bool deferred_batch_norm = false;              // BatchNorm statistics once per batch

  // DDP's and ZeRO-2's gradient buckets, and ZeRO-3's units (dist::FullyShardedOptions).
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;  // DDP's first bucket (small, so communication starts early)
  // DDP gradient compression (dist/compression/make_hook.h): none|fp16|bf16|topk:R|randomk:R|
  // qsgd:S[:D]|sign; error feedback "default" (on for the biased compressors), "true" or "false".
  std::string compression = "none";
  std::string error_feedback = "default";
  int64_t powersgd_start_iter = 1000;  // --compression=powersgd:R: plain all-reduce before
  // The emulated network between ranks (dist::NetworkEmulation): 0 latency and 0 bandwidth
  // (unlimited) is off.
  double net_latency_us = 0;
  double net_bandwidth_gbps = 0;
  // --strategy=local-sgd (dist/local_sgd/): H, the DDP warm-up steps, and DiLoCo's outer
  // optimizer (none: plain averaging).
  int64_t sync_period = 8;
  int64_t local_sgd_warmup = 0;
  std::string outer_optimizer = "none";
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  // --straggler=RANK:FACTOR (dist::StragglerEmulation); empty: off.
  std::string straggler;
  // Reliability: a wait for a peer longer than this ends the job (dist/collective_timeout.h);
  // --inject-fault=crash|stall:RANK:STEP (fault_injection.h), a testing aid.
  double collective_timeout = 600;
  // DDP's all-reduce: flat (one ring over the world) or hierarchical over nodes of
  // ranks_per_node ranks (0: MPI's nodes), the inter-node links optionally slower (-1 / 0: as
  // --net-*).
  std::string collectives = "flat";
  int ranks_per_node = 0;
  double inter_node_latency_us = -1;
  double inter_node_bandwidth_gbps = 0;
  std::string inject_fault;
  // --strategy=gossip: the gossip graph (dist::MixingMatrix).
  std::string gossip_topology = "ring";
  // --strategy=async (dist/async/): server ranks, the SSP bound (-1: none) and Zhang et al.'s
  // staleness-aware learning rate.
  int servers = 1;
  int64_t staleness_bound = -1;
  bool staleness_aware_lr = false;
  // --batch-assignment: "shard" (each worker its fixed 1/W of every epoch) or "shared" (the
  // epoch's batches from a queue on server 0: dist::SharedBatchQueue).
  std::string batch_assignment = "shard";
  int64_t zero3_min_params = 1;  // --zero3-wrap: block (1: every child with parameters) or params:N
  bool zero3_wrap_layers = false;  // --zero3-wrap=layer: every module with parameters of its own
  bool zero3_prefetch = true;    // prefetch the next unit's all-gather (limit 1)
  // --offload (dist/zero/offload/): ZeRO's optimizer state kept in --offload-tier between
  // steps ("none" or "optimizer"), the disk tier's directory.
  std::string offload = "none";
  std::string offload_tier = "disk";
  std::string offload_dir;

  // Tensor parallelism (dist::tensor_parallel): T ranks split each chosen layer; the world is
  // T x D, D data-parallel replicas (--strategy=ddp|zero1, or single when D = 1).
  int tensor_parallel = 1;
  // Context parallelism (dist::context_parallel, ring attention): a GPT's sequences split over C
  // ranks; the world is C x D, D data-parallel replicas (tools/train/context_parallel.h).
  int context_parallel = 1;
  std::string context_parallel_algorithm = "ring";  // ring|ulysses (dist::context_parallel)
  bool tp_head = false;      // the classifier column-parallel with class-parallel cross-entropy
  // --sequence-parallel: a GPT's LayerNorms and residual stream split along the sequence over
  // the tensor-parallel ranks (dist::tensor_parallel::GPTParallelOptions::sequence_parallel).
  bool sequence_parallel = false;
  int64_t num_classes = 10;  // classes of --data=synthetic (Fashion-MNIST has 10)

  // Mixed precision.
  std::string amp = "off";  // off|fp16|bf16
  double loss_scale = 0;    // 0: dynamic; else the static scale
  std::string param_dtype = "f32";  // f32|f16|bf16: the model's parameters (f32 masters in the optimizer)
  std::string memory_format = "contiguous";  // contiguous|channels-last: the activations' layout
  int64_t loss_scale_window = 2000;    // clean steps before the scale grows
  int64_t loss_scale_hysteresis = 1;   // overflows in a row before it backs off
  double min_loss_scale = 0;           // the scale never drops below this

  std::set<std::string> given;  // the flags on the command line, by name

  // Not a flag: a restart of the run by tools/launch (none|same-ranks|fewer-ranks), which
  // checks its command's flags with each kind of restart it may make (support_table.h).
  std::string restart = "none";
};

// A bad flag, a bad value or flags that do not go together, found the same on every rank: the
// tool prints the message and ends with exit code 2. Also raised for options the library
// rejects when the strategy is built (a pipeline that cannot be cut as asked: pipelined.cc).
struct FlagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses argv. On --help prints usage and exits 0; on a bad flag or value prints what was wrong
// and exits 2.
Config parse_flags(int argc, char** argv);
// The same for the arguments after the program's name, throwing FlagError instead of exiting.
Config read_flags(const std::vector<std::string>& args);
// Fills the model's defaults into unset fields.
void apply_model_defaults(Config& config);
// --model=gpt-tiny|gpt-nano|gpt2: a language model on --data=text.
bool language_model(const Config& config);
// The GPT's context (its positions): the longest --seq-len it takes.
int64_t gpt_context(const Config& config);
// Its attention heads (what --tensor-parallel must divide).
int64_t gpt_heads(const Config& config);
// --model=gpt-*'s configuration with --context, --n-layer, --n-head and --n-embd applied.
models::GPTConfig gpt_config(const Config& config, int64_t vocab_size);
// --help: every flag of the table by topic, its values, default and strategies (usage.cc).
std::string usage();

// The pipeline's stage count on `world_size` ranks (--stages, else all of them).
int pipeline_stages(const Config& config, int world_size);
// The settings every rank must share (dist::verify_same_settings): every flag of the table not
// marked per_rank (--threads, --metrics, --data-dir, --collective-timeout may differ), as given
// or defaulted (flag_table.cc).
std::vector<std::pair<std::string, std::string>> settings_that_must_agree(const Config& config);
// "--stages=2 --micro-batches=4 ..." as given or defaulted: for messages.
std::string pipeline_flags(const Config& config, int world_size);

}  // namespace train
}  // namespace tessera
