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
void save_checkpoint(const std::string& path, const StateDict& model_state,
                     const StateDict* optimizer_state, const TrainingProgress& progress,
                     const Metadata& extra = {});

// A checkpoint's contents, for callers that restore the parts themselves.
struct Checkpoint {
  StateDict model, optimizer;  // optimizer is empty when none was saved
  TrainingProgress progress;
  Metadata metadata;
};
Checkpoint read_checkpoint(const std::string& path);

// Loads into `model` (strictly) and `optimizer` (when given and saved), and returns the
// progress. Restoring the random stream into the default generator is the caller's choice.
TrainingProgress load_checkpoint(const std::string& path, nn::Module& model,
                                 optim::Optimizer* optimizer, Metadata* metadata = nullptr);

}  // namespace tessera
