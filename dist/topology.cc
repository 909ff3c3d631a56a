#include "dist/topology.h"

#include "dist/environment.h"

namespace tessera {
namespace dist {

Topology::Topology(std::shared_ptr<ProcessGroup> world, int pipeline_stages)
    : world_(std::move(world)), stages_(pipeline_stages) {
  const int n = world_->size();
  TS_CHECK(pipeline_stages >= 1 && n % pipeline_stages == 0, "Topology: ", n,
           " ranks cannot be split into ", pipeline_stages, " pipeline stages of equal size");
  replicas_ = n / pipeline_stages;
  stage_ = world_->rank() / replicas_;
  replica_ = world_->rank() % replicas_;
  // Group creation is collective over the world: every rank creates every group, keeping its own.
  for (int s = 0; s < stages_; ++s) {
    std::vector<int> ranks;
    for (int d = 0; d < replicas_; ++d) ranks.push_back(s * replicas_ + d);
    auto g = new_group(ranks);
    if (s == stage_) data_parallel_ = g;
  }
  for (int d = 0; d < replicas_; ++d) {
    std::vector<int> ranks;
    for (int s = 0; s < stages_; ++s) ranks.push_back(s * replicas_ + d);
    auto g = new_group(ranks);
    if (d == replica_) pipeline_ = g;
  }
}

}  // namespace dist
}  // namespace tessera
