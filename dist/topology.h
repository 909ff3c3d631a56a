// Topology: how the world's ranks are arranged into pipeline, data-parallel and tensor-parallel
// groups.
//
// With P pipeline stages, T tensor-parallel ranks per layer and D = world / (P T) replicas,
//   world rank = (stage * D + replica) * T + tp_rank
// so a tensor-parallel group is T neighbouring ranks (on one node, where its per-layer
// all-reduces are cheapest, as Megatron-LM places them). Shown for T = 2, D = 2:
//
//                 replica 0        replica 1
//   stage 0       rank 0  rank 1   rank 2  rank 3      tensor-parallel group: one box
//   stage 1       rank 4  rank 5   rank 6  rank 7      ({0, 1}, {2, 3}, ...)
//   ...
//   data-parallel group of (stage s, tp_rank t): the same t in every replica of stage s
//     ({0, 2}, {1, 3}, {4, 6}, ...): gradients are averaged among them;
//   pipeline group of (replica d, tp_rank t): the same (d, t) in every stage, in stage order
//     ({0, 4}, ...): activations flow along it.
//
// With T = 1 this is the data-parallel x pipeline layout: rank = stage * D + replica.
// Every rank builds the same Topology (group creation is collective).
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

class Topology {
 public:
  explicit Topology(std::shared_ptr<ProcessGroup> world, int pipeline_stages = 1,
                    int tensor_parallel_size = 1);

  int pipeline_stages() const { return stages_; }
  int data_parallel_size() const { return replicas_; }
  int tensor_parallel_size() const { return tp_size_; }
  int stage() const { return stage_; }
  int replica() const { return replica_; }
  int tensor_parallel_rank() const { return tp_rank_; }
  const std::shared_ptr<ProcessGroup>& world() const { return world_; }
  // The ranks that hold the same part of the model (gradients are averaged among them).
  const std::shared_ptr<ProcessGroup>& data_parallel_group() const { return data_parallel_; }
  // The stages of this replica, in order (activations flow along it).
  const std::shared_ptr<ProcessGroup>& pipeline_group() const { return pipeline_; }
  // The ranks that split this stage's layers between them (they see the same batch).
  const std::shared_ptr<ProcessGroup>& tensor_parallel_group() const { return tensor_parallel_; }

 private:
  std::shared_ptr<ProcessGroup> world_, data_parallel_, pipeline_, tensor_parallel_;
  int stages_, replicas_, tp_size_, stage_, replica_, tp_rank_;
};

}  // namespace dist
}  // namespace tessera
