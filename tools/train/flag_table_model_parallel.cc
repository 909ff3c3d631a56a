// The flag table's rows for model parallelism: the pipeline's stages, micro-batches and
// schedule, and tensor parallelism (flag_table.h says what a row holds).
#include "tools/train/flag_table.h"

namespace tessera {
namespace train {

namespace {

// "uniform", "params", "time" or layer counts per stage ("3,4,3").
FlagValue balance() {
  return {"uniform|params|time|3,4,3",
          [](Config& c, const std::string&, const std::string& v) { c.balance = to_balance(v); },
          [](const Config& c) { return c.balance; }};
}

}  // namespace

std::vector<FlagSection> model_parallel_flag_sections() {
  const std::vector<std::string> pipeline = {"pipeline"};
  return {
      {"pipeline (N ranks = K stages x N/K data-parallel replicas)",
       {
           Flag("stages", integer(&Config::stages, 1), "K pipeline stages")
               .only_with(pipeline)
               .default_is("every rank (N / --tensor-parallel)"),
           Flag("micro-batches", integer(&Config::micro_batches, 1), "M micro-batches per batch")
               .only_with(pipeline),
           Flag("pipeline-schedule",
                choice(&Config::pipeline_schedule,
                       {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2"}),
                "zb-*: zero-bubble, backward split into B (input gradients) and W (weight "
                "gradients) placed in the bubble")
               .only_with(pipeline),
           Flag("chunks", integer(&Config::chunks, 1),
                "v model chunks per rank, interleaved only (M a multiple of K)")
               .only_with(pipeline),
           Flag("balance", balance(), "layers per stage (K*v counts)").only_with(pipeline),
           Flag("checkpoint-activations",
                choice(&Config::checkpoint_activations, {"never", "except_last", "always"}),
                "recompute activations in backward")
               .only_with(pipeline),
           Flag("deferred-batch-norm", boolean(&Config::deferred_batch_norm),
                "BatchNorm's running statistics updated once per batch from all its "
                "micro-batches instead of once per micro-batch")
               .only_with(pipeline),
           Flag("dp-strategy", choice(&Config::dp_strategy, {"ddp", "zero1", "zero2"}),
                "ddp: each stage's gradients averaged over its replicas after the batch; zero1: a "
                "ZeRO-1 optimizer over the stage's replicas shards its state; zero2: its gradients "
                "too, reduce-scattered after every micro-batch's backward")
               .only_with(pipeline),
       },
       "checkpoints hold the whole model and the stages' optimizer state in the unpipelined "
       "format (any strategy resumes from them, and a pipeline from theirs)"},
      {"tensor parallelism (N ranks = T tensor-parallel x N/T data-parallel replicas)",
       {
           Flag("tensor-parallel", integer(&Config::tensor_parallel, 1),
                "T; with --strategy=ddp|zero1 for the replicas (single when N = T) or pipeline "
                "(3D: stages x T x replicas); --model=mlp: fc1 column-parallel, fc2 row-parallel "
                "(Megatron's MLP block); --model=gpt-*: Megatron's GPT, every block's heads and "
                "MLP and the vocabulary (embedding rows, tied lm_head's logits, the loss); other "
                "models: the classifier (--tp-head)"),
           Flag("tp-head", boolean(&Config::tp_head),
                "the classifier column-parallel, its logits split by class, class-parallel "
                "cross-entropy")
               .default_is("false for mlp, else true"),
           Flag("sequence-parallel", boolean(&Config::sequence_parallel),
                "--model=gpt-* with --tensor-parallel: the LayerNorms and the residual stream "
                "run on --seq-len/T tokens a rank (Megatron's sequence parallelism: all-gather "
                "and reduce-scatter along the sequence instead of the all-reduces, the same "
                "bytes; --seq-len a multiple of T)"),
           Flag("num-classes", integer(&Config::num_classes, 2),
                "classes of --data=synthetic (Fashion-MNIST has 10): a large head"),
       },
       "the same seed gives the same full weights; checkpoints hold the full model and optimizer "
       "state (any run resumes them)"},
      {"context parallelism (N ranks = C context-parallel x N/C data-parallel replicas; with "
       "--tensor-parallel=T, T x C x N/(T C))",
       {
           Flag("context-parallel", integer(&Config::context_parallel, 1),
                "C; --model=gpt-* only: each sequence cut into 2C chunks, rank i of a replica "
                "holding chunks i and 2C-1-i (head-tail), attention by ring attention (K/V "
                "blocks passed around the C ranks); --seq-len must divide by 2C; with "
                "--strategy=ddp|zero1|zero2 the gradients are averaged over the N/T ranks that "
                "hold the same slices (single when N = T C)"),
           Flag("context-parallel-algorithm",
                choice(&Config::context_parallel_algorithm, {"ring", "ulysses"}),
                "ring: K/V blocks passed around the ring while each block computes; ulysses: "
                "DeepSpeed-Ulysses, two all-to-alls trading the sequence split for a split of "
                "the heads (C must divide the heads a rank holds), no overlap")
               .default_is("ring"),
       },
       "parameters and checkpoints as without it: every rank holds the whole model"},
  };
}

}  // namespace train
}  // namespace tessera
