// Training checkpoints: model, optimizer, epoch/step and the random stream in one safetensors
// file ("model.<name>", "optimizer.<name>" tensors; counters in the metadata), so a run can stop
// and resume exactly, and other tools can read the weights. Every tensor and the header carry a
// crc32 (tensor/safetensors.h), checked on every read: a flipped bit is refused, naming the file
// and the tensor. Files written before the hashes are read unchecked (Checkpoint::hashed false).
//
// A run's checkpoint directory: every save goes to a directory of its own, named by the
// optimizer step, and counts only once the file that commits it is in place:
//
//   DIR/step-00000150/checkpoint.safetensors   a full checkpoint, committed by the file itself
//                                              (written under a temporary name, flushed, renamed)
//   DIR/step-00000165/shard-00001-of-00002.safetensors, shard-00002-of-00002.safetensors,
//                    index.safetensors         a sharded one (dist/zero/sharded_checkpoint.h),
//                                              committed by the index, which rank 0 writes once
//                                              every rank's shard is on disk
//   DIR/step-00000180/shard-00001-of-00002.safetensors
//                                              no commit file: a save that was killed, ignored by
//                                              readers and removed by the next save
//
// The previous committed checkpoint stays until the new one is committed; then all but the
// newest kKeepCommitted are removed (two: when the newest fails its hashes, a resume takes the
// one before). Readers take the newest committed checkpoint by step; the files of the layout
// before (DIR/last.safetensors, DIR/last-sharded/) are read too, after every committed one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"
#include "tensor/random.h"
#include "tensor/safetensors.h"

namespace tessera {

struct TrainingProgress {
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps taken
  GeneratorState rng;
};

// optimizer may be null (weights only). `extra` is stored in the metadata as well.
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, const TrainingProgress& progress,
                     const Metadata& extra = {});
// The same with the optimizer state given as a StateDict (ZeRO's consolidated state).
// `extra_state`: further tensors a run keeps across a resume (a communication hook's residuals),
// stored as "extra.<name>".
void save_checkpoint(const std::string& path, const StateDict& model_state,
                     const StateDict* optimizer_state, const TrainingProgress& progress,
                     const Metadata& extra = {}, const StateDict& extra_state = {});

// A checkpoint's contents, for callers that restore the parts themselves.
struct Checkpoint {
  std::string path;            // the file it was read from, for messages
  StateDict model, optimizer;  // optimizer is empty when none was saved
  StateDict extra;             // the "extra.<name>" tensors, without the prefix
  bool has_optimizer = false;
  TrainingProgress progress;
  Metadata metadata;
  bool hashed = false;  // false: written before the content hashes, read without checking
};
Checkpoint read_checkpoint(const std::string& path);

// Restore one part of a read checkpoint, with errors naming its file and tensor. A tensor is
// taken in any precision of its kind (an f32 checkpoint into an f16 model), never across kinds
// (floating point, integer, bool): an f32 tensor relabelled i32 has the same size and would
// load as garbage. load_model_state checks each entry against the model's own tensor, then
// loads strictly (names and shapes); the optimizer checks its own keys and values.
void load_model_state(const Checkpoint& checkpoint, nn::Module& model);
void load_optimizer_state(const Checkpoint& checkpoint, optim::Optimizer& optimizer);

// Reads and restores `model` and `optimizer` (when given; the file must hold its state), and
// returns the progress. Restoring the random stream into the default generator is the caller's
// choice.
TrainingProgress load_checkpoint(const std::string& path, nn::Module& model,
                                 optim::Optimizer* optimizer, Metadata* metadata = nullptr);

// ---- A run's checkpoint directory (the layout above) --------------------------------------------

constexpr const char* kCheckpointFile = "checkpoint.safetensors";  // a full checkpoint's file
constexpr const char* kIndexFile = "index.safetensors";            // a sharded checkpoint's index
constexpr int kKeepCommitted = 2;

// DIR/step-00000150 for step 150; DIR/step-00000150.K (K >= 1) when a committed checkpoint of the
// same step is there already (a run resumed from an older one), so that it is not overwritten.
std::string checkpoint_save_dir(const std::string& dir, int64_t step, int64_t serial);

struct CommittedCheckpoint {
  std::string path;  // the full checkpoint's file, or the sharded checkpoint's directory
  int64_t step = -1;  // from the directory's name; -1 for the layout before
};
// The committed checkpoints under a run's `dir`, newest first: the step directories by step,
// then DIR/last.safetensors and DIR/last-sharded/ (the newer first). Empty when there is none.
std::vector<CommittedCheckpoint> committed_checkpoints(const std::string& dir);

// When `path` is one checkpoint, what a reader opens: a file itself; for a directory holding a
// full checkpoint's file, that file; for one holding an index (a sharded checkpoint), the
// directory. Nothing otherwise (a run's directory, say).
std::optional<std::string> checkpoint_at(const std::string& path);

// Rank 0, before a save at `step`: removes the uncommitted step directories (left by saves that
// were killed), makes the new one, flushes `dir`, and returns its serial for checkpoint_save_dir
// (0 unless that step is committed already). The other ranks must not write before it returns.
int64_t begin_checkpoint_save(const std::string& dir, int64_t step);
// Rank 0, once the save is committed: removes every step directory but the newest `keep`
// committed ones (the commit file first, so a removal cut short leaves an uncommitted directory,
// never a committed one with files missing), and flushes `dir`.
void remove_old_checkpoints(const std::string& dir, int keep = kKeepCommitted);

}  // namespace tessera
