// The flag table's rows for data parallelism: DDP's and ZeRO's buckets, units, compression and
// collectives; local SGD, gossip and asynchronous SGD; the emulated network and the reliability
// aids (flag_table.h says what a row holds).
#include "dist/compression/make_hook.h"
#include "dist/straggler.h"
#include "tensor/check.h"
#include "tools/train/fault_injection.h"
#include "tools/train/flag_table.h"

namespace tessera {
namespace train {

namespace {

// ZeRO-3's units: block (every top-level child with parameters, min_params 1), layer, or
// params:N.
FlagValue zero3_units() {
  return {"block|layer|params:N",
          [](Config& c, const std::string& flag, const std::string& v) {
            if (v == "block") {
              c.zero3_min_params = 1;
            } else if (v.rfind("params:", 0) == 0) {
              c.zero3_min_params = to_int(flag, v.substr(7), 1);
            } else if (v == "layer") {
              c.zero3_wrap_layers = true;
            } else {
              bad("--zero3-wrap must be block, layer or params:N (N >= 1), got '" + v + "'");
            }
          },
          [](const Config& c) {
            return c.zero3_wrap_layers ? std::string("layer") : std::to_string(c.zero3_min_params);
          }};
}

// An iteration count >= 0, or none (-1).
FlagValue staleness_bound() {
  return {"B|none",
          [](Config& c, const std::string& flag, const std::string& v) {
            c.staleness_bound = v == "none" ? -1 : to_int(flag, v, 0);
          },
          [](const Config& c) { return std::to_string(c.staleness_bound); }};
}

// A momentum in [0, 1): 1 would never forget a step.
FlagValue below_one(double Config::*field) {
  FlagValue value = number(field, 0);
  value.set = [set = value.set, field](Config& c, const std::string& flag, const std::string& v) {
    set(c, flag, v);
    if (c.*field >= 1) bad("--" + flag + " must be below 1, got '" + v + "'");
  };
  return value;
}

}  // namespace

std::vector<FlagSection> data_parallel_flag_sections() {
  return {
      {"data parallelism and ZeRO",
       {
           Flag("bucket-cap-mb", positive(&Config::bucket_cap_mb), "MB per gradient bucket")
               .only_with({"ddp", "zero2", "pipeline"},
                          "sizes the gradient buckets of --strategy=ddp and zero2, and of "
                          "--strategy=pipeline --dp-strategy=zero2"),
           Flag("first-bucket-mb", positive(&Config::first_bucket_mb),
                "DDP's first bucket, small so that communication starts early")
               .only_with({"ddp"}, "sizes DDP's first gradient bucket"),
           Flag("compression",
                parsed(&Config::compression,
                       "none|fp16|bf16|topk:RATIO|randomk:RATIO|qsgd:LEVELS[:BUCKET]|sign|powersgd:RANK",
                       [](const std::string& v) { dist::compression::parse_compression(v); }),
                "ddp: each gradient bucket compressed by a communication hook; fp16|bf16 also "
                "with zero1|zero2 (their reduce-scatter in half precision); docs/COMPRESSION.md"),
           Flag("error-feedback", choice(&Config::error_feedback, {"true", "false"}),
                "each rank adds what compression dropped to its next gradient")
               .default_is("on for topk, sign and powersgd, off for the others"),
           Flag("powersgd-start-iter", integer(&Config::powersgd_start_iter, 2),
                "PyTorch's: plain all-reduce for the first N steps of --compression=powersgd"),
           Flag("zero3-wrap", zero3_units(),
                "ZeRO-3's units; block: every top-level child with parameters; layer: every "
                "module with parameters of its own, inside the blocks too (each convolution and "
                "batch norm); params:N: children of at least N parameters, the rest join the root "
                "unit")
               .only_with({"zero3"})
               .default_is("block"),
           Flag("zero3-prefetch", boolean(&Config::zero3_prefetch),
                "the next unit's all-gather starts early, at most one ahead")
               .only_with({"zero3"}),
           Flag("offload", choice(&Config::offload, {"none", "optimizer", "all"}),
                "zero1|zero2|zero3: the optimizer state (Adam's moments) lives in --offload-tier "
                "between steps and is streamed through memory piece by piece at each step, the "
                "next piece read while one steps (ZeRO-Offload, ZeRO-Infinity); all (zero3): each "
                "unit's f32 master shard and gradient shard too, read for its all-gathers and its "
                "step, and the model built without its values (materialized unit by unit), so a "
                "model larger than memory trains (ZeRO-Infinity's offload_param)"),
           Flag("offload-tier", choice(&Config::offload_tier, {"disk", "host"}),
                "where --offload keeps what it offloads: files under --offload-dir read and written in "
                "4 KiB-aligned blocks (O_DIRECT) on an I/O thread pool, or host memory (pinned "
                "on a GPU)"),
           Flag("offload-dir", path(&Config::offload_dir, "DIR", "a directory"),
                "the disk tier's directory (each rank may give its own, a node's local disk): "
                "each rank's files in a subdirectory of its own, removed at exit (a killed "
                "run's at the next start), its free space checked before training")
               .per_rank(),
           Flag("collectives", choice(&Config::collectives, {"flat", "hierarchical"}),
                "ddp, zero1-3: one ring over the world, or reduce-scatter inside each node, "
                "all-reduce across nodes, all-gather inside"),
           Flag("ranks-per-node", integer(&Config::ranks_per_node, 1),
                "G ranks per node of --collectives=hierarchical")
               .default_is("MPI's nodes"),
           Flag("inter-node-latency-us", number(&Config::inter_node_latency_us, 0),
                "the emulated links between nodes of --collectives=hierarchical")
               .default_is("as --net-latency-us"),
           Flag("inter-node-bandwidth-gbps", positive(&Config::inter_node_bandwidth_gbps),
                "the same, their bandwidth")
               .default_is("as --net-bandwidth-gbps"),
       }},
      {"local SGD, gossip and asynchronous SGD (docs/ALGORITHMS.md)",
       {
           Flag("sync-period", integer(&Config::sync_period, 1),
                "H: each rank steps its own model, and the models are averaged every H steps; "
                "evaluation uses the average")
               .only_with({"local-sgd"}),
           Flag("local-sgd-warmup", integer(&Config::local_sgd_warmup, 0),
                "steps of DDP before local SGD starts")
               .only_with({"local-sgd"}),
           Flag("outer-optimizer", choice(&Config::outer_optimizer, {"none", "nesterov"}),
                "none: plain averaging; nesterov: DiLoCo, the averaged change applied by an "
                "outer Nesterov step")
               .only_with({"local-sgd"}),
           Flag("outer-lr", positive(&Config::outer_lr), "DiLoCo's outer learning rate")
               .only_with({"local-sgd"}),
           Flag("outer-momentum", below_one(&Config::outer_momentum), "DiLoCo's outer momentum")
               .only_with({"local-sgd"}),
           Flag("gossip-topology", choice(&Config::gossip_topology, {"ring", "exponential"}),
                "decentralized SGD: each rank averages its model with its neighbours' every "
                "step; evaluation uses the ranks' average model")
               .only_with({"gossip"}),
           Flag("servers", integer(&Config::servers, 1),
                "asynchronous SGD: ranks 0..S-1 are parameter servers, the others workers that "
                "pull, compute and push")
               .only_with({"async"}),
           Flag("staleness-bound", staleness_bound(),
                "a worker waits when B iterations ahead of the slowest (SSP; 0: synchronous)")
               .only_with({"async"})
               .default_is("none"),
           Flag("staleness-aware-lr", boolean(&Config::staleness_aware_lr),
                "the learning rate divided by each push's staleness")
               .only_with({"async"}),
           Flag("batch-assignment", choice(&Config::batch_assignment, {"shard", "shared"}),
                "shard: each worker its own 1/W of the epoch; shared: the next batch from a "
                "queue on server 0 with each pull, so fast workers take more (needs "
                "--staleness-bound=none)")
               .only_with({"async"}),
       }},
      {"the network and reliability",
       {
           Flag("net-latency-us", number(&Config::net_latency_us, 0),
                "an emulated network: every message takes at least U us + bytes / B; "
                "docs/NETWORK.md"),
           Flag("net-bandwidth-gbps", positive(&Config::net_bandwidth_gbps),
                "the emulated network's bandwidth B")
               .default_is("unlimited"),
           Flag("straggler",
                parsed(&Config::straggler, "RANK:FACTOR",
                       [](const std::string& v) { dist::StragglerEmulation::parse(v); }),
                "that rank's training steps take FACTOR times as long: it sleeps"),
           Flag("collective-timeout", number(&Config::collective_timeout, 0),
                "SECONDS (0: none); a wait for another rank longer than this ends the job on "
                "every rank, naming the collective, its number and size, and the rank waited for")
               .per_rank(),
           Flag("inject-fault",
                parsed(&Config::inject_fault,
                       "crash:RANK:STEP|stall:RANK:STEP|crash-in-epoch:RANK:EPOCH|"
                       "crash-in-save:RANK:STEP:PHASE",
                       [](const std::string& v) { FaultInjection::parse(v); }),
                "a testing aid: at optimizer step STEP, counted from the start, rank RANK dies "
                "(SIGKILL) or stops answering (sleeps forever); crash-in-epoch:RANK:EPOCH kills "
                "RANK after its first step of epoch EPOCH; crash-in-save:RANK:STEP:PHASE "
                "kills RANK inside the first sharded checkpoint save at or after STEP, at "
                "mid-shard, before-index or mid-index"),
       }},
  };
}

}  // namespace train
}  // namespace tessera
