// Topology: how the world's ranks are arranged into pipeline, data-parallel, context-parallel
// and tensor-parallel groups.
//
// With P pipeline stages, T tensor-parallel ranks per layer, C context-parallel ranks per
// sequence and D = world / (P C T) replicas,
//   world rank = ((stage * D + replica) * C + cp_rank) * T + tp_rank
// (Megatron-LM's order, tensor-parallel fastest, then context-parallel, then data-parallel, then
// pipeline), so a tensor-parallel group is T neighbouring ranks (on one node, where its
// per-layer all-reduces are cheapest), and a context-parallel group the next-nearest. Shown for
// T = 2, D = 2 (C = 1):
//
//                 replica 0        replica 1
//   stage 0       rank 0  rank 1   rank 2  rank 3      tensor-parallel group: one box
//   stage 1       rank 4  rank 5   rank 6  rank 7      ({0, 1}, {2, 3}, ...)
//   ...
//   data-parallel group of (stage s, tp_rank t): the same t in every replica of stage s
//     ({0, 2}, {1, 3}, {4, 6}, ...): gradients are averaged among them;
//   pipeline group of (replica d, cp_rank c, tp_rank t): the same (d, c, t) in every stage, in
//     stage order ({0, 4}, ...): activations flow along it.
//
// Context parallelism splits each sequence of a replica's batch over its C ranks (each holds
// all of its stage's model, or its tensor-parallel slices of it). Shown for T = 2, C = 2, D = 1:
//
//   cp rank 0: ranks 0 1    cp rank 1: ranks 2 3      tensor-parallel groups {0, 1}, {2, 3};
//   context-parallel groups {0, 2}, {1, 3}: the same slices, each its chunks of the sequence.
//
// A context-parallel rank's gradient is its own tokens' part of the whole (each holds the same
// part of the model), so the data-parallel group, whose ranks average gradients, holds every
// (replica, cp_rank) of a (stage, tp_rank): D x C ranks (Megatron-LM's data-parallel group "with
// context parallelism"). replica_group() holds one rank of each replica at this rank's place,
// the ranks that see different batches: with C = 1 it is the data-parallel group.
//
// With T = C = 1 this is the data-parallel x pipeline layout: rank = stage * D + replica.
// Every rank builds the same Topology (group creation is collective).
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

class Topology {
 public:
  explicit Topology(std::shared_ptr<ProcessGroup> world, int pipeline_stages = 1,
                    int tensor_parallel_size = 1, int context_parallel_size = 1);

  int pipeline_stages() const { return stages_; }
  int data_parallel_size() const { return replicas_; }  // D: the batches trained side by side
  int tensor_parallel_size() const { return tp_size_; }
  int context_parallel_size() const { return cp_size_; }
  int stage() const { return stage_; }
  int replica() const { return replica_; }
  int tensor_parallel_rank() const { return tp_rank_; }
  int context_parallel_rank() const { return cp_rank_; }
  const std::shared_ptr<ProcessGroup>& world() const { return world_; }
  // The ranks that hold the same part of the model (gradients are averaged among them): the
  // replicas, and with context parallelism each replica's C ranks too (D x C ranks).
  const std::shared_ptr<ProcessGroup>& data_parallel_group() const { return data_parallel_; }
  // One rank of each replica, at this rank's (stage, cp_rank, tp_rank): D ranks that see
  // different batches (per-replica figures are summed over it).
  const std::shared_ptr<ProcessGroup>& replica_group() const { return replicas_group_; }
  // The stages of this replica, in order (activations flow along it).
  const std::shared_ptr<ProcessGroup>& pipeline_group() const { return pipeline_; }
  // The ranks that split this stage's layers between them (they see the same tokens).
  const std::shared_ptr<ProcessGroup>& tensor_parallel_group() const { return tensor_parallel_; }
  // The ranks that split this replica's sequences between them (the same slices of the model).
  const std::shared_ptr<ProcessGroup>& context_parallel_group() const { return context_parallel_; }

 private:
  std::shared_ptr<ProcessGroup> world_, data_parallel_, replicas_group_, pipeline_,
      tensor_parallel_, context_parallel_;
  int stages_, replicas_, tp_size_, cp_size_, stage_, replica_, tp_rank_, cp_rank_;
};

}  // namespace dist
}  // namespace tessera
