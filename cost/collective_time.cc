#include "cost/collective_time.h"

#include <algorithm>
#include <cmath>

#include "tensor/check.h"

namespace tessera {
namespace cost {

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kAuto: return "auto";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kHierarchical, Algorithm::kAuto}) {
    if (name == algorithm_name(a)) return a;
  }
  TS_CHECK(false, "unknown collective algorithm '", name, "' (expected ring, tree, hierarchical or auto)");
  return Algorithm::kAuto;
}

namespace {

void check(int ranks, double bytes, const char* what) {
  TS_CHECK(ranks >= 1 && bytes >= 0, what, ": ", ranks, " ranks and ", bytes, " bytes");
}

// One ring pass (a reduce-scatter or an all-gather): N-1 steps of n/N bytes.
double ring_pass(int ranks, double bytes, const Link& link) {
  return (ranks - 1) * link.message_seconds(bytes / ranks);
}

int nodes_of(int ranks, const Network& network) {
  const int g = network.ranks_per_node;
  TS_CHECK(g >= 1, "ranks per node must be >= 1, got ", g);
  if (ranks <= g) return 1;
  TS_CHECK(ranks % g == 0, "a hierarchical collective needs the ranks per node (", g,
           ") to divide the ranks (", ranks, ")");
  return ranks / g;
}

// Reduce-scatter or all-gather in two levels: inside the node over n, across nodes over n/G.
double hierarchical_pass(int ranks, double bytes, const Network& network) {
  const int nodes = nodes_of(ranks, network);
  const int local = ranks / nodes;
  return ring_pass(local, bytes, network.intra) + ring_pass(nodes, bytes / local, network.inter);
}

CollectiveTime faster(CollectiveTime a, CollectiveTime b) { return b.seconds < a.seconds ? b : a; }

}  // namespace

double ring_all_reduce_seconds(int ranks, double bytes, const Link& link) {
  check(ranks, bytes, "ring all-reduce");
  return 2 * ring_pass(ranks, bytes, link);
}

double tree_all_reduce_seconds(int ranks, double bytes, const Link& link) {
  check(ranks, bytes, "tree all-reduce");
  if (ranks == 1) return 0;
  return 2 * std::ceil(std::log2(ranks)) * link.latency + 2 * bytes / link.bandwidth;
}

double ring_reduce_scatter_seconds(int ranks, double bytes, const Link& link) {
  check(ranks, bytes, "ring reduce-scatter");
  return ring_pass(ranks, bytes, link);
}

double ring_all_gather_seconds(int ranks, double bytes, const Link& link) {
  check(ranks, bytes, "ring all-gather");
  return ring_pass(ranks, bytes, link);
}

double hierarchical_all_reduce_seconds(int ranks, double bytes, const Network& network) {
  check(ranks, bytes, "hierarchical all-reduce");
  const int nodes = nodes_of(ranks, network);
  const int local = ranks / nodes;
  const double across = std::min(ring_all_reduce_seconds(nodes, bytes / local, network.inter),
                                 tree_all_reduce_seconds(nodes, bytes / local, network.inter));
  return 2 * ring_pass(local, bytes, network.intra) + across;
}

CollectiveTime all_reduce_time(int ranks, double bytes, const Network& network) {
  const CollectiveTime ring{Algorithm::kRing, ring_all_reduce_seconds(ranks, bytes, network.inter)};
  switch (network.algorithm) {
    case Algorithm::kRing: return ring;
    case Algorithm::kTree:
      return {Algorithm::kTree, tree_all_reduce_seconds(ranks, bytes, network.inter)};
    case Algorithm::kHierarchical:
      return {Algorithm::kHierarchical, hierarchical_all_reduce_seconds(ranks, bytes, network)};
    case Algorithm::kAuto: {
      CollectiveTime best =
          faster(ring, {Algorithm::kTree, tree_all_reduce_seconds(ranks, bytes, network.inter)});
      if (network.ranks_per_node > 1) {
        best = faster(best, {Algorithm::kHierarchical,
                             hierarchical_all_reduce_seconds(ranks, bytes, network)});
      }
      return best;
    }
  }
  return ring;
}

namespace {

CollectiveTime ring_or_hierarchical_pass(int ranks, double bytes, const Network& network) {
  check(ranks, bytes, "reduce-scatter / all-gather");
  const CollectiveTime ring{Algorithm::kRing, ring_pass(ranks, bytes, network.inter)};
  const CollectiveTime two_level{Algorithm::kHierarchical, network.ranks_per_node > 1
                                                               ? hierarchical_pass(ranks, bytes, network)
                                                               : ring.seconds};
  if (network.algorithm == Algorithm::kHierarchical) return two_level;
  if (network.algorithm == Algorithm::kAuto && network.ranks_per_node > 1) return faster(ring, two_level);
  return ring;
}

}  // namespace

CollectiveTime reduce_scatter_time(int ranks, double bytes, const Network& network) {
  return ring_or_hierarchical_pass(ranks, bytes, network);
}

CollectiveTime all_gather_time(int ranks, double bytes, const Network& network) {
  return ring_or_hierarchical_pass(ranks, bytes, network);
}

}  // namespace cost
}  // namespace tessera
