#include "dist/hierarchical_reduce_scatter.h"

#include "dist/hierarchical_all_reduce.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

// Where each rank's segment starts in rank order, and the same segments grouped by local rank
// (local 0's segments in node order, then local 1's, ...).
struct SegmentLayout {
  std::vector<int64_t> by_rank_offset, by_local_offset;
  std::vector<int64_t> local_counts;  // elements per local rank's part
  std::vector<int64_t> node_counts;   // this rank's local part, per node (the inter-node counts)
};

SegmentLayout layout_of(const NodeGroups& nodes, const std::vector<int64_t>& counts) {
  const int g = nodes.ranks_per_node(), n = nodes.nodes();
  TS_CHECK(static_cast<int>(counts.size()) == g * n, "hierarchical collective: ", counts.size(),
           " counts for ", g * n, " ranks (", n, " nodes of ", g, ")");
  SegmentLayout s;
  s.by_rank_offset.resize(counts.size());
  s.by_local_offset.resize(counts.size());
  s.local_counts.assign(g, 0);
  int64_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    TS_CHECK(counts[r] >= 0, "hierarchical collective: count ", counts[r], " for rank ", r);
    s.by_rank_offset[r] = at;
    at += counts[r];
  }
  at = 0;
  for (int l = 0; l < g; ++l) {
    for (int node = 0; node < n; ++node) {
      const int r = node * g + l;
      s.by_local_offset[r] = at;
      at += counts[r];
      s.local_counts[l] += counts[r];
    }
  }
  for (int node = 0; node < n; ++node) s.node_counts.push_back(counts[node * g + nodes.local_rank()]);
  return s;
}

// Copies every rank's segment from one order to the other.
void regroup(const Tensor& from, const std::vector<int64_t>& from_offset, const Tensor& to,
             const std::vector<int64_t>& to_offset, const std::vector<int64_t>& counts) {
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    Tensor(to.narrow(0, to_offset[r], counts[r])).copy_(from.narrow(0, from_offset[r], counts[r]));
  }
}

int64_t total(const std::vector<int64_t>& counts) {
  int64_t t = 0;
  for (int64_t c : counts) t += c;
  return t;
}

}  // namespace

std::shared_ptr<Work> hierarchical_reduce_scatter(const NodeGroups& nodes, const Tensor& input,
                                                  const Tensor& output,
                                                  const std::vector<int64_t>& counts, ReduceOp op) {
  const SegmentLayout s = layout_of(nodes, counts);
  const int me = nodes.node() * nodes.ranks_per_node() + nodes.local_rank();
  TS_CHECK(input.numel() == total(counts) && output.numel() == counts[me],
           "hierarchical reduce-scatter: input ", input.numel(), " and output ", output.numel(),
           " elements for counts summing to ", total(counts), " (this rank's ", counts[me], ")");
  const Tensor grouped = empty({input.numel()}, input.options());
  regroup(input.reshape({-1}), s.by_rank_offset, grouped, s.by_local_offset, counts);
  const Tensor part = empty({s.local_counts[nodes.local_rank()]}, input.options());
  auto intra = nodes.intra_node()->reduce_scatter(grouped, part, s.local_counts, op);
  auto inter = nodes.inter_node();
  const std::vector<int64_t> node_counts = s.node_counts;
  return std::make_shared<ChainedWork>(intra, [inter, part, output, node_counts, op, grouped] {
    inter->reduce_scatter(part, output, node_counts, op)->wait();
  });
}

std::shared_ptr<Work> hierarchical_all_gather(const NodeGroups& nodes, const Tensor& input,
                                              const Tensor& output,
                                              const std::vector<int64_t>& counts) {
  const SegmentLayout s = layout_of(nodes, counts);
  const int me = nodes.node() * nodes.ranks_per_node() + nodes.local_rank();
  TS_CHECK(input.numel() == counts[me] && output.numel() == total(counts),
           "hierarchical all-gather: input ", input.numel(), " and output ", output.numel(),
           " elements for counts summing to ", total(counts), " (this rank's ", counts[me], ")");
  const Tensor part = empty({s.local_counts[nodes.local_rank()]}, input.options());
  auto across = nodes.inter_node()->all_gather(input, part, s.node_counts);
  auto intra = nodes.intra_node();
  return std::make_shared<ChainedWork>(across, [intra, part, output, s, counts] {
    const Tensor grouped = empty({output.numel()}, output.options());
    intra->all_gather(part, grouped, s.local_counts)->wait();
    regroup(grouped, s.by_local_offset, output.reshape({-1}), s.by_rank_offset, counts);
  });
}

HierarchicalGroup::HierarchicalGroup(std::shared_ptr<ProcessGroup> world, NodeGroups nodes)
    : world_(std::move(world)), nodes_(std::move(nodes)) {
  TS_CHECK(world_ != nullptr && world_->size() == nodes_.nodes() * nodes_.ranks_per_node(),
           "HierarchicalGroup: the nodes hold ", nodes_.nodes() * nodes_.ranks_per_node(),
           " ranks, the group ", world_ ? world_->size() : 0, " (it spans the world)");
}

std::shared_ptr<Work> HierarchicalGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  check_reduce_op(op, tensor.dtype(), "all_reduce");
  if (tensor.is_contiguous()) return hierarchical_all_reduce(nodes_, tensor.reshape({-1}), op);
  const Tensor flat = tensor.contiguous().reshape({-1});
  auto work = hierarchical_all_reduce(nodes_, flat, op);
  return std::make_shared<ChainedWork>(work, [tensor, flat] {
    Tensor(tensor).copy_(flat.view(tensor.shape()));
  });
}

std::shared_ptr<Work> HierarchicalGroup::reduce_scatter(const Tensor& input, const Tensor& output,
                                                        const std::vector<int64_t>& counts,
                                                        ReduceOp op) {
  check_reduce_op(op, input.dtype(), "reduce_scatter");
  return hierarchical_reduce_scatter(nodes_, input, output, counts, op);
}

std::shared_ptr<Work> HierarchicalGroup::all_gather(const Tensor& input, const Tensor& output,
                                                    const std::vector<int64_t>& counts) {
  return hierarchical_all_gather(nodes_, input, output, counts);
}

std::shared_ptr<Work> HierarchicalGroup::broadcast(const Tensor& tensor, int root) {
  return world_->broadcast(tensor, root);
}
std::shared_ptr<Work> HierarchicalGroup::send(const Tensor& tensor, int dst, int tag) {
  return world_->send(tensor, dst, tag);
}
std::shared_ptr<Work> HierarchicalGroup::recv(const Tensor& tensor, int src, int tag) {
  return world_->recv(tensor, src, tag);
}
std::shared_ptr<Work> HierarchicalGroup::barrier() { return world_->barrier(); }

}  // namespace dist
}  // namespace tessera
