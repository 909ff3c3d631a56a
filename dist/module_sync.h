// Keeping replicas identical: checking that every rank holds the same parameters, and copying
// rank 0's parameters and buffers to the others.
#pragma once

#include "dist/process_group.h"
#include "nn/module.h"

namespace tessera {
namespace dist {

// Collective. Throws on every rank, naming the first difference (name, shape or dtype) between
// this rank's parameter list and rank 0's, when they differ anywhere.
void verify_same_parameters(const nn::Module& module, ProcessGroup& group);
// Collective. Broadcasts the parameters (and buffers, if asked) from `root`.
void broadcast_module_states(const nn::Module& module, ProcessGroup& group, int root = 0,
                             bool buffers = true);
void broadcast_buffers(const nn::Module& module, ProcessGroup& group, int root = 0);

}  // namespace dist
}  // namespace tessera
