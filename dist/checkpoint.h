// Training checkpoints: model, optimizer, epoch/step and the random stream in one safetensors
// file ("model.<name>", "optimizer.<name>" tensors; counters in the metadata), so a run can stop
// and resume exactly, and other tools can read the weights.
#pragma once

#include <string>

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

}  // namespace tessera
