// The optimizer state of a tensor-parallel model in the unsplit model's format, so that a
// checkpoint's optimizer section moves between tensor-parallel and single-process runs as its
// model section does.
//
// An ElementwiseOptimizer's (or ZeRO's consolidated) state dict holds, per parameter I,
// "state.I.NAME" tensors of the parameter's shape (momentum, Adam's moments, an f32 master).
// For a split parameter that is this rank's slice; gathering each such tensor along the
// parameter's split dimension (as the layer's state_dict() gathers its weight) gives the
// state an unsplit model's optimizer would hold, and slicing it back gives each rank its part:
//
//   rank 0: state.3.exp_avg [128, 785] ─┐ all-gather along dim 0      state.3.exp_avg [256, 785]
//   rank 1: state.3.exp_avg [128, 785] ─┘ (fc1 is column-parallel) ─>  (the unsplit model's)
//
// The split parameters are the column- and row-parallel Linears' and a VocabParallelEmbedding's
// rows. Scalars ("state.I.step") and the state of parameters that are not split pass through.
// Parameters are numbered as the optimizer numbers them: `order` is its parameters()
// (parameter groups in order: GPT-2's decay group before the rest), or, when empty,
// model.parameters(), for an optimizer made over those.
#pragma once

#include <vector>

#include "nn/module.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {
namespace tensor_parallel {

// Collective over the model's tensor-parallel group(s): every rank calls it with the same keys.
StateDict gather_optimizer_state(const StateDict& local, nn::Module& model,
                                 const std::vector<Variable>& order = {});
// This rank's slices of a full (unsplit model's) optimizer state dict; no communication.
StateDict slice_optimizer_state(const StateDict& full, nn::Module& model,
                                const std::vector<Variable>& order = {});

// Per parameter of `order` (empty: model.parameters()): true when every rank of its
// tensor-parallel group holds it whole (a row-parallel layer's bias, the layers left unsplit),
// false for a split one.
std::vector<bool> replicated_parameters(nn::Module& model, const std::vector<Variable>& order = {});

}  // namespace tensor_parallel
}  // namespace dist
}  // namespace tessera
