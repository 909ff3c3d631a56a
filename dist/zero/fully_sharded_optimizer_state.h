// ZeRO-3's optimizer state in the unsplit model's format, so that a full checkpoint of a
// FullyShardedDataParallel run carries the optimizer as ZeRO-1/2 (zero_optimizer.h), tensor
// parallelism (dist/tensor_parallel/optimizer_state.h) and a pipeline write it, and resumes into
// one process, DDP, ZeRO-1/2 or ZeRO-3 on any world size, and the other way round.
//
// The optimizer over fsdp.shard_parameters() holds, per unit u, "state.u.NAME" tensors of
// the shard's S elements (momentum, Adam's moments). Gathering each unit's shards gives its flat
// padded vector, which the unit's layout cuts into per-parameter tensors, numbered as the
// unsplit model's optimizer numbers them (model.named_parameters() order):
//
//   unit 0 (w0 [2, 3], b0 [3]; 9 elements padded to 12 over N = 3 ranks, S = 4):
//   shards:       rank 0 [ w0 w0 w0 w0 ]  rank 1 [ w0 w0 b0 b0 ]  rank 2 [ b0 pad pad pad ]
//   all-gather:   [ w0 w0 w0 w0 w0 w0 | b0 b0 b0 | pad pad pad ]   (N-1) S elements per rank
//   full state:   state.0.exp_avg [2, 3]   state.1.exp_avg [3]      the padding dropped
//
// and loading cuts each rank's S elements back out of the per-parameter tensors (no
// communication; the padding is zero, as the padded gradients keep it). With parameter groups
// (a zero::GroupedShardOptimizer over fsdp.flat_shards(): GPT-2's decay and no-decay groups) the
// local state has the same form, one flat vector per unit, and the full state numbers the
// parameters in the groups' order, as the unsplit optimizer over those groups does (state_order). The step count is one
// per unit, the same for all its parameters. A unit of f16/bf16 parameters keeps its f32 values
// in the shard (the master): they are saved as "state.I.master", as an unsplit optimizer saves
// its masters, and loaded back into the shard, so a round trip rounds nothing.
#pragma once

#include "dist/zero/fully_sharded.h"
#include "optim/optimizer.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {
namespace zero {

// Collective over fsdp.group(): every rank gets the whole state. `optimizer` is the ordinary
// optimizer over fsdp.shard_parameters(), in that order.
StateDict gather_optimizer_state(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer);

// Throws (naming `who`) unless `optimizer` steps fsdp.shard_parameters(), one per unit, in unit
// order: an ordinary optimizer over them, or a GroupedShardOptimizer over fsdp.flat_shards().
// Its "state.u." keys are then unit u's (this file's and the sharded checkpoint's contract).
void check_shard_optimizer(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer,
                           const char* who);

// The model's parameters in the order the unsplit optimizer numbers its state: the groups'
// order of a GroupedShardOptimizer (its parameters()), the model's own for an ordinary
// optimizer over the shards (the unsplit one is over model.parameters()).
std::vector<Variable> state_order(FullyShardedDataParallel& fsdp, const optim::Optimizer& optimizer);

// Loads a full (unsplit model's) optimizer state dict into `optimizer`, each rank its shards,
// without communication; masters go into the shards, so call it after loading the model.
void load_optimizer_state(const StateDict& full, FullyShardedDataParallel& fsdp,
                          optim::Optimizer& optimizer);

}  // namespace zero
}  // namespace dist
}  // namespace tessera
