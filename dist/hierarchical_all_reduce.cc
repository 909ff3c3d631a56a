#include "dist/hierarchical_all_reduce.h"

#include "tensor/ops.h"

namespace tessera {
namespace dist {

std::shared_ptr<Work> hierarchical_all_reduce(const NodeGroups& nodes, const Tensor& buffer,
                                              ReduceOp op) {
  ProcessGroup& intra = *nodes.intra_node();
  const std::vector<int64_t> counts = balanced_counts(buffer.numel(), intra.size());
  const Tensor shard = empty({counts[intra.rank()]}, buffer.options());
  auto scattered = intra.reduce_scatter(buffer, shard, counts, op);
  auto inter = nodes.inter_node();
  auto intra_group = nodes.intra_node();
  return std::make_shared<ChainedWork>(scattered, [inter, intra_group, shard, buffer, counts, op] {
    inter->all_reduce(shard, op)->wait();
    intra_group->all_gather(shard, buffer, counts)->wait();
  });
}

std::shared_ptr<Work> HierarchicalAllReduceHook::reduce(ProcessGroup& group, GradBucket& bucket) {
  TS_CHECK(group.size() == nodes_.nodes() * nodes_.ranks_per_node(), "hierarchical all-reduce: "
           "DDP's group has ", group.size(), " ranks, the nodes ", nodes_.nodes() * nodes_.ranks_per_node(),
           " (it reduces over the world)");
  return hierarchical_all_reduce(nodes_, bucket.buffer);
}

}  // namespace dist
}  // namespace tessera
