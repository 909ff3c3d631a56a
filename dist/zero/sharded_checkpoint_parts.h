// The pieces both stages' sharded checkpoints are made of (sharded_checkpoint.cc: ZeRO-1/2,
// sharded_checkpoint_fsdp.cc: ZeRO-3): writing each rank's flat vectors and the index, opening a
// checkpoint (sharded, or a full one through full_checkpoint_source.cc), checking its layout
// against the model and assembling any range of a flat vector from the files. Internal to
// dist/zero; the API is sharded_checkpoint.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/checkpoint.h"
#include "dist/process_group.h"
#include "dist/zero/checkpoint_index.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {
namespace zero {
namespace checkpoint_parts {

// The precision a parameter's values are saved and assembled in: its master's.
inline DType master_dtype(DType d) { return d == kF64 ? kF64 : kF32; }

// Runs `body` on every rank of `group` (just here when null). If it throws on any rank, it throws
// on every rank: the failing ranks their own error, the others one naming the first failing
// rank, so one rank's bad file ends the job instead of leaving the others at a collective.
void on_every_rank(ProcessGroup* group, const char* who, const std::function<void()>& body);

// The model's name for optimizer parameter p (an error naming it when the model lacks it).
std::string name_in(const std::vector<std::pair<std::string, Variable>>& named, const Variable& p,
                    const char* who);

// ---- Saving ------------------------------------------------------------------------------------

// One flat vector as this rank holds it.
struct SavedVector {
  IndexVector vector;
  std::vector<IndexParam> params;  // offsets within this vector
  std::vector<Range> files;        // every rank's part
  Tensor values;                   // this rank's part, master precision
  bool has_state = false;
  int64_t step = 0;
  std::vector<std::pair<std::string, Tensor>> state;  // key -> this rank's part
};

// Optimizer parameter `i`'s element-wise state ("state.I.NAME", the step apart), each cut to
// the first `count` elements (a stage-3 shard without its padding).
void take_state(const StateDict& state, int64_t i, int64_t count, SavedVector& out);

// Every rank writes its file and flushes it to disk; once every rank has confirmed (a
// collective), rank 0 writes the index, with the hash of every file's header: an index always
// describes files that are complete and durable. Collective.
void write_sharded(const std::string& dir, const std::string& strategy,
                   std::vector<SavedVector> vectors, const optim::Optimizer* optimizer,
                   const StateDict& buffers, const TrainingProgress& progress,
                   const Metadata& extra, ProcessGroup& group);

// The model's buffers by name (saved whole in the index).
StateDict buffers_of(const nn::Module& model);

// ---- Loading -----------------------------------------------------------------------------------

// A checkpoint opened for reading: its index and the reader of its files.
struct Source {
  CheckpointIndex index;
  std::unique_ptr<ShardReader> reader;
};

// A full checkpoint (dist/checkpoint.h) described as a sharded one written by one rank: one
// vector per parameter (`names`, the model's parameters in the optimizer's order), in memory.
std::unique_ptr<Source> open_full_checkpoint(const std::string& path,
                                             const std::vector<std::string>& names);

// A sharded checkpoint's directory, or a full checkpoint file (open_full_checkpoint).
std::unique_ptr<Source> open_source(const std::string& path, const std::vector<std::string>& names);

// What a run expects: its parameters' names, shapes and dtypes.
struct Expected {
  std::string name;
  Shape shape;
  DType dtype;
};

// The checkpoint holds exactly these parameters, with these shapes and dtypes.
void check_layout(const CheckpointIndex& index, const std::vector<Expected>& expected);

// A parameter's place in the flat vector a run holds.
struct Placed {
  std::string name;
  int64_t offset = 0, numel = 0;
};

// Elements `range` of a flat vector laid out as `params`, read from the checkpoint: the values
// ("param") or a state key. Padding (beyond the last parameter) is zero.
Tensor assemble(const ShardReader& reader, const std::vector<Placed>& params, const Range& range,
                const std::string& what, const TensorOptions& options);

// One parameter of an optimizer: the flat vector it stands for and its part of it.
struct OptimizerSlot {
  std::vector<Placed> params;
  Range range;
  Shape shape;            // the optimizer parameter's shape
  TensorOptions options;  // the state's dtype and device
  bool master = false;    // an f16/bf16 parameter: its master copy is state too
};

// The optimizer state dict of an optimizer whose parameter i is slots[i].
StateDict optimizer_state(const Source& source, const std::vector<OptimizerSlot>& slots);

// Loads `state`, its errors naming the checkpoint.
void load_optimizer(optim::Optimizer& optimizer, const StateDict& state, const Source& source);

// The model's parameters (whole) and buffers.
void load_model(const Source& source, nn::Module& model);

// The names, in order.
std::vector<std::string> names_of(const std::vector<std::pair<std::string, Variable>>& named);

// The names of `numbered` (an optimizer's parameters(), the order its state is numbered in: its
// groups'), then those of the other parameters of `named` in their order: how a full
// checkpoint's optimizer state numbers the model's parameters (open_full_checkpoint).
std::vector<std::string> names_in_state_order(
    const std::vector<std::pair<std::string, Variable>>& named,
    const std::vector<Variable>& numbered, const char* who);

}  // namespace checkpoint_parts
}  // namespace zero
}  // namespace dist
}  // namespace tessera
