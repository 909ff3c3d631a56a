// Hierarchical reduce-scatter and all-gather: ZeRO's pair of collectives over nodes of G ranks,
// sending 1/G of the buffer between nodes, as hierarchical_all_reduce.h does for DDP.
//
// The flat buffer holds one segment per world rank, in rank order (rank r = node n x G + local l
// owns segment r, counts[r] elements: ZeRO's shards). The two levels need the segments grouped
// by local rank, so the buffer is first copied in that order:
//
//   G = 2, 2 nodes:   flat   [ s0 | s1 | s2 | s3 ]           (s0, s1 on node 0; s2, s3 on node 1)
//                     by local rank  [ s0 s2 | s1 s3 ]        local 0's part | local 1's part
//
//   reduce-scatter:  1. inside the node: local rank l gets the node's sum of its part (s_l, s_{G+l}, ...)
//                    2. across nodes (the ranks with local rank l): rank n G + l gets the sum of s_{nG+l}
//   all-gather:      1. across nodes: local rank l gathers its part from every node
//                    2. inside the node: every rank gathers the G parts; then back to rank order
//
// Bytes each rank sends: inside the node (G-1)/G x n (a flat ring over G), across nodes
// (N/G - 1)/(N/G) x n/G; a flat ring over N sends (N-1)/N x n, all of it across nodes when the
// ring spans them. kSum, kMean, kMax and kMin compose over the two levels (a mean of means over
// equal groups is the mean). The result equals the flat collective's up to the order of the
// additions. The returned Work issues step 1 at once and step 2 on the thread that waits.
#pragma once

#include <memory>
#include <vector>

#include "dist/node_groups.h"
#include "dist/work.h"

namespace tessera {
namespace dist {

// input: sum(counts) elements on every rank; output: counts[world rank] elements.
std::shared_ptr<Work> hierarchical_reduce_scatter(const NodeGroups& nodes, const Tensor& input,
                                                  const Tensor& output,
                                                  const std::vector<int64_t>& counts,
                                                  ReduceOp op = ReduceOp::kSum);
// input: counts[world rank] elements; output: sum(counts), every rank's in rank order.
std::shared_ptr<Work> hierarchical_all_gather(const NodeGroups& nodes, const Tensor& input,
                                              const Tensor& output,
                                              const std::vector<int64_t>& counts);

// The same world as a ProcessGroup: reduce-scatter, all-gather and all-reduce go through the
// node levels above (and hierarchical_all_reduce.h); broadcast, point-to-point and barrier go
// to the world. Give it to ZeroRedundancyOptimizer or FullyShardedDataParallel as their group
// and their collectives become hierarchical. Its own ledger stays empty: the bytes are on the
// intra- and inter-node groups' ledgers, per level.
class HierarchicalGroup : public ProcessGroup {
 public:
  HierarchicalGroup(std::shared_ptr<ProcessGroup> world, NodeGroups nodes);
  int rank() const override { return world_->rank(); }
  int size() const override { return world_->size(); }
  const std::vector<int>& world_ranks() const override { return world_->world_ranks(); }
  const NodeGroups& nodes() const { return nodes_; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::kSum) override;
  std::shared_ptr<Work> reduce_scatter(const Tensor& input, const Tensor& output,
                                       const std::vector<int64_t>& counts,
                                       ReduceOp op = ReduceOp::kSum) override;
  std::shared_ptr<Work> all_gather(const Tensor& input, const Tensor& output,
                                   const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag) override;
  std::shared_ptr<Work> barrier() override;
  using ProcessGroup::all_gather;
  using ProcessGroup::reduce_scatter;

 private:
  std::shared_ptr<ProcessGroup> world_;
  NodeGroups nodes_;
};

}  // namespace dist
}  // namespace tessera
