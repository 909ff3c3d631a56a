#include "dist/topology.h"

#include "dist/environment.h"

namespace tessera {
namespace dist {

Topology::Topology(std::shared_ptr<ProcessGroup> world, int pipeline_stages,
                   int tensor_parallel_size)
    : world_(std::move(world)), stages_(pipeline_stages), tp_size_(tensor_parallel_size) {
  const int n = world_->size();
  TS_CHECK(pipeline_stages >= 1 && tensor_parallel_size >= 1 &&
               n % (pipeline_stages * tensor_parallel_size) == 0,
           "Topology: ", n, " ranks cannot be split into ", pipeline_stages,
           " pipeline stages x ", tensor_parallel_size,
           " tensor-parallel ranks x a whole number of data-parallel replicas");
  replicas_ = n / (pipeline_stages * tensor_parallel_size);
  const auto rank_of = [&](int s, int d, int t) { return (s * replicas_ + d) * tp_size_ + t; };
  tp_rank_ = world_->rank() % tp_size_;
  replica_ = (world_->rank() / tp_size_) % replicas_;
  stage_ = world_->rank() / (tp_size_ * replicas_);
  // Group creation is collective over the world: every rank creates every group, keeping its own.
  for (int s = 0; s < stages_; ++s) {
    for (int t = 0; t < tp_size_; ++t) {
      std::vector<int> ranks;
      for (int d = 0; d < replicas_; ++d) ranks.push_back(rank_of(s, d, t));
      auto g = new_group(ranks);
      if (s == stage_ && t == tp_rank_) data_parallel_ = g;
    }
  }
  for (int d = 0; d < replicas_; ++d) {
    for (int t = 0; t < tp_size_; ++t) {
      std::vector<int> ranks;
      for (int s = 0; s < stages_; ++s) ranks.push_back(rank_of(s, d, t));
      auto g = new_group(ranks);
      if (d == replica_ && t == tp_rank_) pipeline_ = g;
    }
  }
  for (int s = 0; s < stages_; ++s) {
    for (int d = 0; d < replicas_; ++d) {
      std::vector<int> ranks;
      for (int t = 0; t < tp_size_; ++t) ranks.push_back(rank_of(s, d, t));
      auto g = new_group(ranks);
      if (s == stage_ && d == replica_) tensor_parallel_ = g;
    }
  }
}

}  // namespace dist
}  // namespace tessera
