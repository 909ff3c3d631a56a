// Sharded checkpoints for ZeRO: every rank writes its own shard of the parameters and of the
// optimizer state, in parallel, and any number of ranks reads them back.
//
//   DIR/shard-00001-of-00003.safetensors   rank 0: elements [0, 5) of each flat vector
//   DIR/shard-00002-of-00003.safetensors   rank 1: [5, 10)        "vector.V.param" (master
//   DIR/shard-00003-of-00003.safetensors   rank 2: [10, 14)        values), "vector.V.state.KEY"
//   DIR/index.safetensors                  rank 0, written last: the layout (names, shapes,
//                                          dtypes, offsets, each file's ranges), the optimizer's
//                                          step and options, the buffers, the progress
//
//   save on N = 3:   [ r0 | r1 | r2 ]          every rank writes what it holds, no gather
//   load on M = 2:   [ r0' ..... | r1' ..... ]  rank r' reads the index, computes its new
//                       ^^^^^ ^^                 range(s) and reads exactly the overlapping
//                       file 1 file 2             elements of the old files (no communication)
//
// Stages 1 and 2 (ZeroRedundancyOptimizer) save one flat vector, cut as its shards are; stage 3
// (FullyShardedDataParallel) one vector per unit, each rank its shard without the padding. As
// the index names every parameter and where it lives, a checkpoint loads into any of them on any
// world size, and into an unsharded model and optimizer (single process, DDP), which read the
// whole tensors. A full checkpoint of dist/checkpoint.h loads into a sharded run the same way.
// The layout of the index and of the files: dist/zero/checkpoint_index.h.
//
// Optimizer state: every element-wise tensor of the optimizer's per-parameter state (SGD's
// momentum_buffer, Adam's exp_avg and exp_avg_sq) is sharded like the parameters; the step
// count and the options (learning rate, ...) are one value, kept in the index. Half-precision
// parameters are saved through their f32 master values, so nothing is rounded by a round trip.
//
// Commit order: every rank writes its shard atomically (tensor/atomic_file.h) and flushes it to
// disk; all ranks confirm in a collective; then rank 0 writes the index, which commits the
// checkpoint: a directory without an index is a save that did not finish. The index records the
// crc32 of every shard's header, each header the crc32 of each of its tensors, and the index its
// own (tensor/safetensors.h): loading checks every byte it uses, and a flipped bit is refused
// with an error naming the file and the tensor. (tools/train saves each time into a new
// directory, dist/checkpoint.h, so the previous checkpoint stays whole until the index of the
// new one is in place.) Saving and loading into a sharded run
// are collective: when any rank fails (a file it cannot write or read, a layout that disagrees
// with the model), every rank throws, the failing one its own error and the others an error
// naming that rank, so the job ends instead of hanging at its next collective. Checking the
// index and every file's header against the model happens on every rank, so those errors are
// the same everywhere.
#pragma once

#include <functional>
#include <string>

#include "dist/checkpoint.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {
namespace zero {

// Collective over optimizer.group(): ZeRO-1/2. `model` names the parameters (those of the
// optimizer, under the model's names) and gives the buffers.
// `extra`: strings of the caller's kept in the index (a full checkpoint's metadata holds the
// same), returned by the loaders below.
void save_sharded_checkpoint(const std::string& dir, const nn::Module& model,
                             const ZeroRedundancyOptimizer& optimizer,
                             const TrainingProgress& progress, const Metadata& extra = {});
// Collective over fsdp.group(): ZeRO-3. `optimizer` (may be null) is the ordinary optimizer over
// fsdp.shard_parameters(), in that order.
void save_sharded_checkpoint(const std::string& dir, FullyShardedDataParallel& fsdp,
                             const optim::Optimizer* optimizer, const TrainingProgress& progress,
                             const Metadata& extra = {});

// `source` is a sharded checkpoint's directory (written on any world size) or a full checkpoint
// file (dist/checkpoint.h). Loads the model's parameters and buffers, and the optimizer's state
// and options when `optimizer` is given (the checkpoint must hold them), and returns the
// progress. With a ZeroRedundancyOptimizer each rank reads the whole parameters (the model is
// replicated) and its own shard of the state, collectively over the optimizer's group; with an
// ordinary optimizer (single process, or DDP, whose parameters are in model.named_parameters()
// order) it reads whole tensors, without communication.
// `extra` (may be null) receives the saver's strings (a full checkpoint: its metadata).
TrainingProgress load_sharded_checkpoint(const std::string& source, nn::Module& model,
                                         optim::Optimizer* optimizer, Metadata* extra = nullptr);
// Collective over fsdp.group(): each rank reads its shard of every unit, and the state of
// `optimizer` (the ordinary optimizer over fsdp.shard_parameters(); may be null).
TrainingProgress load_sharded_checkpoint(const std::string& source, FullyShardedDataParallel& fsdp,
                                         optim::Optimizer* optimizer, Metadata* extra = nullptr);

// Checks every hash of a checkpoint without loading it into anything: a sharded checkpoint's
// directory (the index, every shard's header and every tensor) or a full checkpoint file. Returns
// whether it carries hashes (false: written before them, and loadable all the same); a corrupt
// file is an error naming the file and the tensor. Not collective.
bool verify_checkpoint(const std::string& source);

// A testing aid (the train tool's --inject-fault=crash-in-save): `hook(phase)` is called on every
// rank during each sharded save at "mid-shard" (this rank's shard is in its temporary file, not
// yet renamed into place), "before-index" (every shard on disk, no index yet) and, on rank 0,
// "mid-index" (the index in its temporary file). An empty hook: none (the default).
using SavePhaseHook = std::function<void(const std::string& phase)>;
void set_save_phase_hook(SavePhaseHook hook);

}  // namespace zero
}  // namespace dist
}  // namespace tessera
