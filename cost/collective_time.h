// Collective times under the alpha-beta model (cost/link.h): what an all-reduce, a
// reduce-scatter or an all-gather of n bytes over N ranks costs, per algorithm.
//
// Ring (Patarasuk and Yuan; what dist/process_group_mpi.cc runs): the buffer is cut into N
// chunks; a reduce-scatter takes N-1 steps, each sending one chunk of n/N bytes to the right
// neighbour, and an all-gather N-1 more:
//
//   reduce-scatter   (N-1) alpha + (N-1)/N n / beta        n = the input (the whole buffer)
//   all-gather       (N-1) alpha + (N-1)/N n / beta        n = the output (the whole buffer)
//   all-reduce       2 (N-1) alpha + 2 (N-1)/N n / beta    = reduce-scatter + all-gather
//
// Bandwidth-optimal, but its latency grows with N: at N = 4096 and alpha = 5 us the all-reduce
// pays 2 x 4095 x 5 us = 41 ms before a single byte counts.
//
// Double binary tree (Sanders et al.; NCCL's tree algorithm, as its tuning model prices it):
// the data goes up a tree to the root and back down; two complementary trees each carry half
// the data, so every rank sends and receives about the buffer's size in each direction:
//
//   all-reduce       2 ceil(log2 N) alpha + 2 n / beta
//
// Hierarchical (dist/hierarchical_all_reduce.h; Horovod's and NCCL's tree-of-rings idea), for
// N ranks on N/G nodes of G ranks, with an intra-node link (alpha_i, beta_i):
//
//   1. reduce-scatter inside the node   (G-1) alpha_i + (G-1)/G n / beta_i
//   2. all-reduce across the N/G nodes  of n/G bytes, over the inter-node link, by the faster
//                                       of ring and tree
//   3. all-gather inside the node       (G-1) alpha_i + (G-1)/G n / beta_i
//
// The picker (Algorithm::kAuto) does what NCCL's tuner does: price every algorithm for this N
// and message size and take the fastest. Small messages at large N go to the tree (log2 N
// latency terms), large ones to the ring (its bandwidth term is 2(N-1)/N against the tree's 2),
// so a 4096-rank job does not collapse on the ring's 2(N-1) alpha.
//
// A flat algorithm (ring, tree) runs every message over the inter-node link (the slowest one a
// ring must cross). Reduce-scatter and all-gather are ring collectives (NCCL has no tree for
// them); hierarchical ones run the same two levels as the all-reduce: inside the node over
// n, then across nodes over n/G.
#pragma once

#include <string>

#include "cost/link.h"

namespace tessera {
namespace cost {

enum class Algorithm { kRing, kTree, kHierarchical, kAuto };
const char* algorithm_name(Algorithm algorithm);  // "ring", "tree", "hierarchical", "auto"
Algorithm parse_algorithm(const std::string& name);  // an error names the text otherwise

struct Network {
  Link inter;              // between nodes; every link of a flat ring or tree
  Link intra;              // inside a node (hierarchical only)
  int ranks_per_node = 1;  // G
  Algorithm algorithm = Algorithm::kAuto;
};

// N ranks, n bytes.
double ring_all_reduce_seconds(int ranks, double bytes, const Link& link);
double tree_all_reduce_seconds(int ranks, double bytes, const Link& link);
double ring_reduce_scatter_seconds(int ranks, double bytes, const Link& link);
double ring_all_gather_seconds(int ranks, double bytes, const Link& link);
// Needs N <= G (one node: a ring over the intra-node link) or G dividing N.
double hierarchical_all_reduce_seconds(int ranks, double bytes, const Network& network);

// A collective's time and the algorithm that gives it (the fastest one under kAuto).
struct CollectiveTime {
  Algorithm algorithm = Algorithm::kRing;
  double seconds = 0;
};
CollectiveTime all_reduce_time(int ranks, double bytes, const Network& network);
// Ring, or the two levels under kHierarchical (and under kAuto when G > 1 and that is faster).
CollectiveTime reduce_scatter_time(int ranks, double bytes, const Network& network);
CollectiveTime all_gather_time(int ranks, double bytes, const Network& network);

}  // namespace cost
}  // namespace tessera
