// NodeGroups: the world's ranks as nodes of G consecutive ranks, the layout mpirun and srun
// give by default (ranks fill a node before the next), with two kinds of groups:
//
//   G = 2, 4 ranks:        node 0          node 1
//                        rank 0  rank 1   rank 2  rank 3
//   intra-node groups:   {0, 1}           {2, 3}          fast links (shared memory, NVLink)
//   inter-node groups:   {0, 2} (local rank 0), {1, 3} (local rank 1)     the network
//
// G comes from MPI (the ranks that share memory with this one: MPI_Comm_split_type) or is given
// to emulate G-rank nodes on one machine (--ranks-per-node). Collective over the world.
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

class NodeGroups {
 public:
  // Nodes of `ranks_per_node` consecutive world ranks; throws unless it divides the world size.
  static NodeGroups emulated(int ranks_per_node);
  // The nodes MPI sees (ranks sharing memory); throws, naming the sizes, if they differ or are
  // not consecutive ranks.
  static NodeGroups detect();

  int ranks_per_node() const { return ranks_per_node_; }
  int nodes() const { return nodes_; }
  int node() const { return node_; }
  int local_rank() const { return local_rank_; }
  // This rank's node, and the ranks with its local rank on every node (in node order).
  const std::shared_ptr<ProcessGroup>& intra_node() const { return intra_; }
  const std::shared_ptr<ProcessGroup>& inter_node() const { return inter_; }

 private:
  NodeGroups(int ranks_per_node);
  int ranks_per_node_ = 1, nodes_ = 1, node_ = 0, local_rank_ = 0;
  std::shared_ptr<ProcessGroup> intra_, inter_;
};

}  // namespace dist
}  // namespace tessera
