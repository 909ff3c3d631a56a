#include "tools/train/collectives.h"

#include <algorithm>

namespace tessera {
namespace train {

HierarchicalCollectives::HierarchicalCollectives(const Config& c) {
  dist::NodeGroups nodes = c.ranks_per_node > 0 ? dist::NodeGroups::emulated(c.ranks_per_node)
                                                : dist::NodeGroups::detect();
  if (c.inter_node_latency_us >= 0 || c.inter_node_bandwidth_gbps > 0) {
    // The links between nodes: their own emulated network (the rest keep --net-*).
    dist::NetworkEmulation net = nodes.inter_node()->network_emulation();
    if (c.inter_node_latency_us >= 0) net.latency_us = c.inter_node_latency_us;
    if (c.inter_node_bandwidth_gbps > 0) net.bandwidth_gbps = c.inter_node_bandwidth_gbps;
    nodes.inter_node()->set_network_emulation(net);
  }
  hook_ = std::make_shared<dist::HierarchicalAllReduceHook>(std::move(nodes));
}

void HierarchicalCollectives::report(json::Object& summary, int64_t steps) const {
  const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(steps, 1));
  const dist::NodeGroups& nodes = hook_->nodes();
  json::Object j;
  j.add("kind", "hierarchical")
      .add("ranks_per_node", nodes.ranks_per_node())
      .add("nodes", nodes.nodes())
      .add("intra_node_bytes_per_step", intra_node()->ledger().total_bytes() * per_step)
      .add("inter_node_bytes_per_step", inter_node()->ledger().total_bytes() * per_step)
      .add("inter_node_emulated_seconds", inter_node()->ledger().emulated_seconds());
  summary.add_raw("collectives", j.str());
}

}  // namespace train
}  // namespace tessera
