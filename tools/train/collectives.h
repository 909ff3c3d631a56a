// --collectives=hierarchical [--ranks-per-node=G] [--inter-node-latency-us=U
// --inter-node-bandwidth-gbps=B]: DDP's buckets reduced by dist::hierarchical_all_reduce over
// nodes of G ranks (MPI's nodes when G is not given), ZeRO's reduce-scatters and all-gathers by
// dist::HierarchicalGroup, the inter-node groups optionally on a slower emulated network than
// --net-*. The JSON's "collectives" gives each level's bytes.
#pragma once

#include <memory>
#include <optional>

#include "dist/hierarchical_all_reduce.h"
#include "dist/hierarchical_reduce_scatter.h"
#include "tools/train/flags.h"
#include "tools/train/report.h"

namespace tessera {
namespace train {

class HierarchicalCollectives {
 public:
  // Collective over the world (the node groups are made here).
  explicit HierarchicalCollectives(const Config& config);
  std::shared_ptr<dist::HierarchicalAllReduceHook> hook() const { return hook_; }
  // The world with its collectives over the nodes (ZeRO's group).
  std::shared_ptr<dist::HierarchicalGroup> group(std::shared_ptr<dist::ProcessGroup> world) const {
    return std::make_shared<dist::HierarchicalGroup>(std::move(world), hook_->nodes());
  }
  // The intra- and inter-node groups (their ledgers count each level's bytes).
  dist::ProcessGroup* intra_node() const { return hook_->nodes().intra_node().get(); }
  dist::ProcessGroup* inter_node() const { return hook_->nodes().inter_node().get(); }
  void report(json::Object& summary, int64_t steps) const;

 private:
  std::shared_ptr<dist::HierarchicalAllReduceHook> hook_;
};

}  // namespace train
}  // namespace tessera
