// Topology: how the world's ranks are arranged into data-parallel and pipeline groups.
//
// With P pipeline stages and D = world / P replicas, world rank = stage * D + replica:
//
//            replica 0   replica 1   ...                  data-parallel group of stage s:
//   stage 0  rank 0      rank 1      ... rank D-1           ranks s*D .. s*D + D-1
//   stage 1  rank D      rank D+1    ...                  pipeline group of replica d:
//   ...                                                     ranks d, D + d, 2D + d, ...
//
// Every rank builds the same Topology (group creation is collective).
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

class Topology {
 public:
  explicit Topology(std::shared_ptr<ProcessGroup> world, int pipeline_stages = 1);

  int pipeline_stages() const { return stages_; }
  int data_parallel_size() const { return replicas_; }
  int stage() const { return stage_; }
  int replica() const { return replica_; }
  const std::shared_ptr<ProcessGroup>& world() const { return world_; }
  // The ranks that hold the same stage (gradients are averaged among them).
  const std::shared_ptr<ProcessGroup>& data_parallel_group() const { return data_parallel_; }
  // The stages of this replica, in order (activations flow along it).
  const std::shared_ptr<ProcessGroup>& pipeline_group() const { return pipeline_; }

 private:
  std::shared_ptr<ProcessGroup> world_, data_parallel_, pipeline_;
  int stages_, replicas_, stage_, replica_;
};

}  // namespace dist
}  // namespace tessera
