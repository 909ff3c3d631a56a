// Hierarchical all-reduce (Horovod's and NCCL's tree-of-rings idea, DeepSpeed's hierarchical
// groups): a flat ring over N ranks on N/G nodes sends every byte over the slowest link; this
// sends only 1/G of the buffer between nodes.
//
//   1. reduce-scatter inside the node     each of the G ranks ends with the node's sum of 1/G
//   2. all-reduce across nodes            of that 1/G, with the same local rank on every node
//   3. all-gather inside the node         every rank ends with the whole sum
//
// Bytes each rank sends: inside the node 2 (G-1)/G n (as a flat ring over G), across nodes
// 2 (N/G - 1)/(N/G) x n/G: 1/G of a flat ring's, on the links that are slow. Each level's
// group has its own byte ledger (and may have its own network emulation). The sum is the same
// as the flat ring's up to the order of the additions (bitwise when the values add exactly).
//
// The returned Work issues step 1 at once and steps 2 and 3 on the thread that waits (DDP
// waits once, at the end of backward), so the first step overlaps the backward and the others
// do not.
#pragma once

#include <memory>
#include <string>

#include "dist/ddp/comm_hooks.h"
#include "dist/node_groups.h"

namespace tessera {
namespace dist {

// In place: `buffer` (flat, the same size on every rank) becomes its reduction over the world
// (kSum, kMean, kMax, kMin: each composes over the two levels).
std::shared_ptr<Work> hierarchical_all_reduce(const NodeGroups& nodes, const Tensor& buffer,
                                              ReduceOp op = ReduceOp::kSum);

// DDP's buckets reduced hierarchically; DDP's group must be the world.
class HierarchicalAllReduceHook : public CommunicationHook {
 public:
  explicit HierarchicalAllReduceHook(NodeGroups nodes) : nodes_(std::move(nodes)) {}
  std::string name() const override { return "hierarchical"; }
  std::shared_ptr<Work> reduce(ProcessGroup& group, GradBucket& bucket) override;
  const NodeGroups& nodes() const { return nodes_; }

 private:
  NodeGroups nodes_;
};

}  // namespace dist
}  // namespace tessera
