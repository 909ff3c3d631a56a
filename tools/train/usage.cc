// The train tool's --help text.
#include "tools/train/flags.h"

namespace tessera {
namespace train {

std::string usage() {
  return R"(train: trains a model with tessera and reports its test accuracy.

  bazel run -c opt //tools:train -- --model=logistic
  mpirun -np 2 bazel-bin/tools/train --model=logistic --strategy=zero1

flags (defaults depend on --model; see below):
  --model=logistic|mlp|resnet20|resnet32|resnet56|resnet18|resnet34|resnet50
  --strategy=single|ddp|zero1|zero2|zero3|pipeline|local-sgd|gossip|async (under mpirun -np N;
            --batch-size is per rank,
            for pipeline per data-parallel replica: all stages of a pipeline share each batch)
  --data=fashion-mnist|synthetic   --data-dir=DIR (/usr/share/datasets/fashion-mnist)
  --epochs=N  --batch-size=N  --lr=X  --optimizer=sgd|adam|adamw  --momentum=X
  --weight-decay=X  --schedule=constant|step|cosine  --warmup-epochs=N
  --label-smoothing=X  --augment=true|false  --seed=N  --threads=N
  --device=cpu|cuda|cuda:N (cuda: rank r uses GPU r mod the number of GPUs; --config=cuda builds)
  --train-limit=N (first N training images only)  --synthetic-size=N
  --checkpoint-dir=DIR (saves DIR/last.safetensors after every epoch)
  --resume=FILE|DIR (continues from a checkpoint; a directory means DIR/last.safetensors, or
            DIR/last-sharded, or DIR itself when it is a sharded checkpoint)
  --metrics=FILE (rank 0 appends JSON lines: one per step, loss, lr, images/s, loss scale, and one
            per epoch with test accuracy; explain curves draws them)
  --trace=FILE (a Chrome trace, every rank's events in one file written by rank 0: per rank a
            compute track and one per communication thread; DDP's layers and buckets, ZeRO's
            gathers, frees and reduce-scatters, pipeline actions; explain ddp|zero3 read it)
  --trace-steps=FIRST:LAST|STEP|last (the optimizer steps --trace records, from 1; last)

data parallelism and ZeRO:
  --bucket-cap-mb=X (25: gradient buckets of ddp and zero2)  --first-bucket-mb=X (1: ddp's first)
  --compression=none|fp16|bf16|topk:RATIO|randomk:RATIO|qsgd:LEVELS|sign|powersgd:RANK (ddp:
            each gradient bucket compressed by a communication hook; docs/COMPRESSION.md)
  --error-feedback=true|false (default: on for topk, sign and powersgd, off for the others)
  --powersgd-start-iter=N (1000, PyTorch's: plain all-reduce for the first N steps; >= 2)
  --strategy=local-sgd --sync-period=H (8) [--local-sgd-warmup=STEPS (0)] (each rank steps its
            own model, averaged every H steps after STEPS of DDP; evaluation uses the average)
            [--outer-optimizer=none|nesterov --outer-lr=LR (0.7) --outer-momentum=M (0.9)] (DiLoCo)
  --strategy=gossip --gossip-topology=ring|exponential (decentralized SGD: each rank averages its
            model with its neighbours' every step; evaluation uses the ranks' average model)
  --strategy=async --servers=S (1) --staleness-bound=B|none (none) [--staleness-aware-lr=true]
            (asynchronous SGD: ranks 0..S-1 are parameter servers, the others workers that pull,
            compute and push; a worker waits when B iterations ahead of the slowest (SSP; 0:
            synchronous); the learning rate divided by each push's staleness if asked;
            docs/ALGORITHMS.md) [--batch-assignment=shard|shared (shard: each worker its own
            1/W of the epoch; shared: the next batch from a queue on server 0 with each pull,
            so fast workers take more; needs --staleness-bound=none)]
  --straggler=RANK:FACTOR (that rank's training steps take FACTOR times as long: it sleeps)
  --collectives=flat|hierarchical (ddp, zero1-3: one ring over the world, or reduce-scatter inside each
            node, all-reduce across nodes, all-gather inside) [--ranks-per-node=G (MPI's nodes)
            --inter-node-latency-us=U --inter-node-bandwidth-gbps=B (the links between nodes)]
  --collective-timeout=SECONDS (600; 0: none): a wait for another rank longer than this ends the
            job on every rank, naming the collective, its number and size, and the rank waited for
  --inject-fault=crash:RANK:STEP|stall:RANK:STEP (a testing aid: at optimizer step STEP, counted
            from the start, rank RANK dies (SIGKILL) or stops answering (sleeps forever))
  --net-latency-us=U --net-bandwidth-gbps=B (an emulated network: every message takes at least
            U us + bytes / B; docs/NETWORK.md)
  --zero3-wrap=block|layer|params:N (block: every top-level child with parameters is a unit;
            layer: every module with parameters of its own, inside the blocks too (each
            convolution and batch norm); params:N: children of at least N parameters, the rest
            join the root unit)
  --zero3-prefetch=true|false (true: the next unit's all-gather starts early, at most one ahead)
  --checkpoint-format=full|sharded (full: rank 0 writes the whole model and optimizer state;
            sharded, zero1|zero2|zero3 only: DIR/last-sharded/, every rank its shard in parallel
            and rank 0 an index; single, ddp and ZeRO runs on any number of ranks resume it)

pipeline (--strategy=pipeline; N ranks = K stages x N/K data-parallel replicas):
  --stages=K (default N)  --micro-batches=M (4)
  --pipeline-schedule=gpipe|1f1b|interleaved|zb-h1|zb-h2 (1f1b; zb-*: zero-bubble, backward split
            into B (input gradients) and W (weight gradients) placed in the bubble)
  --chunks=v (model chunks per rank, interleaved only; M a multiple of K)
  --balance=uniform|params|time|3,4,3 (layers per stage; K*v entries)
  --checkpoint-activations=never|except_last|always (recompute activations in backward; never)
  --deferred-batch-norm=true|false (false; true: BatchNorm's running statistics updated once
            per batch from all its micro-batches instead of once per micro-batch)
  --dp-strategy=ddp|zero1|zero2 (ddp: each stage's gradients averaged over its replicas after
            the batch; zero1: a ZeRO-1 optimizer over the stage's replicas shards its state;
            zero2: its gradients too, reduce-scattered after every micro-batch's backward)
  checkpoints hold the whole model and the stages' optimizer state in the unpipelined format
            (any strategy resumes from them, and a pipeline from theirs)

tensor parallelism (N ranks = T tensor-parallel x N/T data-parallel replicas):
  --tensor-parallel=T (1) with --strategy=ddp|zero1 for the replicas (single when N = T);
            --model=mlp: fc1 column-parallel, fc2 row-parallel (Megatron's MLP block);
            other models (or --tp-head=true): the classifier column-parallel, its logits split
            by class, class-parallel cross-entropy; the same seed gives the same full weights;
            checkpoints hold the full model and optimizer state (any run resumes them)
  --num-classes=N (10; --data=synthetic only: a large head)

mixed precision:
  --amp=off|fp16|bf16 (autocast for forward and loss; fp16 scales the loss, bf16 does not)
  --loss-scale=dynamic|N (fp16 only; N: a static scale)
  --param-dtype=f32|f16|bf16 (the model's parameters and gradients; the optimizer keeps f32
            masters; BatchNorm stays f32; f16 parameters are loss-scaled)
  --loss-scale-window=N (2000: clean steps before the scale doubles)
  --loss-scale-hysteresis=N (1: overflows in a row before it halves)  --min-loss-scale=X (0)

defaults:
  logistic  adam lr 1e-3, batch 64, 5 epochs, cosine
  mlp       adam lr 1e-3, batch 64, 10 epochs, cosine
  resnet*   sgd (nesterov, momentum 0.9) lr 0.1, weight decay 5e-4, batch 128,
            cosine, random crop + flip, 10 epochs (ResNet-20: 0.93 test accuracy)
)";
}

}  // namespace train
}  // namespace tessera
