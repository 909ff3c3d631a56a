// The support table's refusals and resets (support_table.h says how they are read). A
// refusal's `why` is what a user needs to choose instead; the cases that were silent wrong
// answers or crashes before they were refused say what went wrong.
#include "tools/train/support_table.h"
#include "tools/train/support_values.h"

namespace tessera {
namespace train {

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
        {"strategy", {"zero3", "local-sgd", "gossip", "async"}}},
       "context parallelism combines with --strategy=ddp, zero1 or zero2 for the data-parallel "
       "dimension (single when there is none), whose gradient averages over the dp x cp ranks "
       "are the average it needs, and with the pipeline (its stages' data-parallel groups hold "
       "those ranks); ZeRO-3's units and the decentralized strategies' own averaging have not "
       "been built around the sequence split"},
      {{{"context-parallel", {"on"}}, {"model", {"plain", "batch-norm"}}},
       "context parallelism splits each sequence over the ranks and passes attention's keys and "
       "values around them: it is for --model=gpt-*; the MLP and the ResNets see one example "
       "at a time and have no sequence to split"},

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

      // Offload.
      {{{"offload", {"optimizer"}}, {"strategy", except(kStrategies, {"zero1", "zero2", "zero3"})}},
       "the offload layer sits under ZeRO's shards (ZeRO-Offload, ZeRO-Infinity); one process, "
       "DDP, the pipeline (its --dp-strategy=zero1|zero2 too), local SGD, gossip and the "
       "parameter servers keep their optimizer state in memory: use --strategy=zero1|zero2|zero3"},
      {{{"offload", {"all"}}, {"strategy", except(kStrategies, {"zero3"})}},
       "--offload=all moves ZeRO-3's unit shards (parameters and gradients) below the device; "
       "the other strategies hold whole parameters: use --strategy=zero3, or --offload=optimizer "
       "with zero1|zero2"},
      {{{"offload", {"all"}}, {"amp", {"fp16"}}},
       "fp16 loss scaling unscales and checks for infinities the gradients in memory, and "
       "--offload=all keeps them in the store between backward and the step: use --amp=bf16 "
       "(no loss scaling)"},
      {{{"offload", {"all"}}, {"param-dtype", {"bf16", "f16"}}},
       "--offload=all builds the model without its values and materializes each unit as it "
       "shards it, in f32; half-precision computation comes from --amp=bf16 (units gathered in "
       "bf16 over their f32 master shards)"},
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

}  // namespace train
}  // namespace tessera
