// --strategy=async: asynchronous SGD with parameter servers (dist/async/). Ranks 0..S-1
// (--servers=S) hold the parameters and the optimizer; the other W ranks are workers that
// pull, compute on their own shard of the data and push, held by the staleness bound
// (--staleness-bound=B, SSP; none: plain asynchronous SGD), with the learning rate optionally
// divided by each push's staleness (--staleness-aware-lr). Workers read the training data; the
// servers serve each iteration's pushes (their training "step" waits until every worker has
// pushed it, and returns the workers' mean loss). Before evaluation every rank gathers the
// servers' parameters and the workers' mean BatchNorm statistics, and the test set is split
// over all ranks. With --batch-assignment=shared the workers take the epoch's batches one at a
// time from server 0's queue (dist::SharedBatchQueue) with their pulls instead of a fixed shard
// each, and each server serves the epoch until every worker's is over. The final JSON adds
// "staleness" and "parameter_server" (with "batches_per_worker" under shared batches).
// A GPT's AdamW with weight decay has two parameter groups (the Linear weights decayed, the
// biases, LayerNorms and embeddings not): each server cuts its shard where the group changes and
// steps each piece under its group's options (dist::zero::GroupedShardOptimizer, ZeRO's way).
// Checkpoints (after an epoch, the servers idle): the model is the servers' shards gathered, the
// optimizer their states in the unsplit model's format (dist/async/server_state.h; numbered
// as one process's optimizer over the same groups numbers them), the extra
// tensor "async.clocks" each worker's pushes; a resume restores all three (docs/ALGORITHMS.md).
#pragma once

#include <memory>

#include "dist/process_group.h"
#include "nn/sequential.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

std::unique_ptr<Strategy> make_asynchronous(const Config& config,
                                            std::shared_ptr<nn::Sequential> model,
                                            std::shared_ptr<dist::ProcessGroup> world,
                                            Criterion criterion, MixedPrecision& precision);

}  // namespace train
}  // namespace tessera
