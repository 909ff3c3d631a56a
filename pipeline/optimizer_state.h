// A pipeline's optimizer state in the whole model's format, so a pipeline checkpoint carries
// it and resumes under one process, DDP, ZeRO or another number of stages, and the other way
// round (the model's weights move the same way through Pipe::gather_model).
//
// Each rank's optimizer steps only its stage's parameters and numbers them 0, 1, 2, ... in
// Pipe::parameters() order ("state.I.NAME", optim/optimizer.h). The whole model's optimizer
// numbers them in model->parameters() order. Pipe::parameter_indices() maps one to the other:
//
//   model parameters:   0  1 | 2  3 | 4  5        (K = 2 stages, v = 1: parts [0,1,2] [3,4,5])
//   stage 0 optimizer:  0  1   2  3               state.2.exp_avg  ->  state.2.exp_avg
//   stage 1 optimizer:               0  1         state.1.exp_avg  ->  state.5.exp_avg
//
// Gathering renumbers each stage's entries and all-gathers them over the pipeline group
// (dist::all_gather_state_dicts: stages hold different entries); slicing keeps this rank's
// entries and renumbers them back. The "param_groups.G.NAME" entries (lr, momentum, ...) are
// the same on every stage and pass through. With a ZeRO-1 optimizer over a stage's replicas,
// pass its consolidated state_dict() (collective over the data-parallel group) and load the
// slice into it: its format is the plain optimizer's.
#pragma once

#include "pipeline/pipe.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace pipeline {

// Collective over the pipe's pipeline group: `local` is this rank's optimizer.state_dict();
// returns, on every rank, the state an optimizer over the whole model would hold.
StateDict gather_optimizer_state(const Pipe& pipe, const StateDict& local);

// No communication: this rank's part of a whole-model optimizer state, numbered for an
// optimizer over pipe.parameters(), ready for its load_state_dict().
StateDict slice_optimizer_state(const Pipe& pipe, const StateDict& full);

}  // namespace pipeline
}  // namespace tessera
