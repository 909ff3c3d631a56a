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
// entries and renumbers them back. With a ZeRO-1 optimizer over a stage's replicas, pass its
// consolidated state_dict() (collective over the data-parallel group) and load the slice into
// it: its format is the plain optimizer's.
//
// Parameter groups. An optimizer numbers its parameters group after group (GPT-2's decay group,
// then the rest), not in the model's order, and "param_groups.G.NAME" (lr, weight decay, ...)
// belongs to its group G; a stage may lack a group (a last stage of only ln_f and lm_head has no
// decayed weight). Given both optimizers' groups, `groups` (this rank's, parameter_groups(opt);
// empty: one group of pipe.parameters()) and `model_groups` (those of an optimizer over the
// whole model made the same way; empty: one group of the model's parameters()), each parameter
// and each group is renumbered by where it sits in the whole model's: a stage's group is the
// whole model's group holding its parameters.
//
// A tied parameter's copies (tied_parameters.h) hold the same state as its owner: the gathered
// state has the owner's, once, and slicing gives it to every copy.
#pragma once

#include <vector>

#include "autograd/variable.h"
#include "optim/optimizer.h"
#include "pipeline/pipe.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace pipeline {

// Parameters as an optimizer numbers them: its groups, each its parameters in order.
using ParameterGroups = std::vector<std::vector<Variable>>;
ParameterGroups parameter_groups(const optim::Optimizer& optimizer);

// Collective over the pipe's pipeline group: `local` is this rank's optimizer.state_dict();
// returns, on every rank, the state an optimizer over the whole model would hold.
StateDict gather_optimizer_state(const Pipe& pipe, const StateDict& local,
                                 const ParameterGroups& groups = {},
                                 const ParameterGroups& model_groups = {});

// No communication: this rank's part of a whole-model optimizer state, numbered for this rank's
// optimizer (`groups`, as above), ready for its load_state_dict().
StateDict slice_optimizer_state(const Pipe& pipe, const StateDict& full,
                                const ParameterGroups& groups = {},
                                const ParameterGroups& model_groups = {});

}  // namespace pipeline
}  // namespace tessera
