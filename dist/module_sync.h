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
// The same for a list of (name, parameter).
void verify_same_parameters(const std::vector<std::pair<std::string, Variable>>& named,
                            ProcessGroup& group);
// Collective. Broadcasts the given tensors' values from `root`.
void broadcast_parameters(const std::vector<Variable>& params, ProcessGroup& group, int root = 0);
// Collective. Broadcasts the parameters (and buffers, if asked) from `root`.
void broadcast_module_states(const nn::Module& module, ProcessGroup& group, int root = 0,
                             bool buffers = true);
void broadcast_buffers(const nn::Module& module, ProcessGroup& group, int root = 0);

// Collective. Makes every rank's buffers (BatchNorm's running statistics) equal to rank 0's.
//
// PyTorch's semantics: DDP (broadcast_buffers, the default) copies rank 0's buffers to every
// rank at the start of each forward, so rank 0's are the model's; but the last forward of
// training updates each rank's statistics with its own batch, so right after training the
// ranks differ again, and rank 0's are the ones a checkpoint saved by rank 0 holds. Call this
// after training (and before evaluating on every rank or checkpointing), so evaluation on any
// rank and the saved checkpoint agree. ZeRO-trained models need it too: their forward is the
// plain model's, whose statistics stay per rank.
inline void sync_buffers(const nn::Module& module, ProcessGroup& group) {
  broadcast_buffers(module, group, 0);
}

}  // namespace dist
}  // namespace tessera
