#include "dist/node_groups.h"

#include <mpi.h>

#include <vector>

#include "dist/environment.h"
#include "dist/mpi_check.h"
#include "dist/process_group_mpi.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

NodeGroups::NodeGroups(int ranks_per_node) : ranks_per_node_(ranks_per_node) {
  auto w = world();
  const int n = w->size(), me = w->rank();
  TS_CHECK(ranks_per_node >= 1 && n % ranks_per_node == 0, "NodeGroups: ", ranks_per_node,
           " ranks per node does not divide the ", n, " ranks");
  nodes_ = n / ranks_per_node;
  node_ = me / ranks_per_node;
  local_rank_ = me % ranks_per_node;
  // Group creation is collective: every rank creates every group, keeping its own.
  for (int node = 0; node < nodes_; ++node) {
    std::vector<int> ranks;
    for (int l = 0; l < ranks_per_node; ++l) ranks.push_back(node * ranks_per_node + l);
    auto g = new_group(ranks);
    if (node == node_) intra_ = g;
  }
  for (int l = 0; l < ranks_per_node; ++l) {
    std::vector<int> ranks;
    for (int node = 0; node < nodes_; ++node) ranks.push_back(node * ranks_per_node + l);
    auto g = new_group(ranks);
    if (l == local_rank_) inter_ = g;
  }
}

NodeGroups NodeGroups::emulated(int ranks_per_node) { return NodeGroups(ranks_per_node); }

NodeGroups NodeGroups::detect() {
  auto w = std::static_pointer_cast<ProcessGroupMPI>(world());
  MPI_Comm shared;
  MPI_CHECK(MPI_Comm_split_type(w->comm(), MPI_COMM_TYPE_SHARED, w->rank(), MPI_INFO_NULL, &shared));
  int size = 0, local = 0;
  MPI_CHECK(MPI_Comm_size(shared, &size));
  MPI_CHECK(MPI_Comm_rank(shared, &local));
  MPI_CHECK(MPI_Comm_free(&shared));
  // Every node the same size, and ranks filling nodes in order.
  Tensor mine = from_vector<int64_t>({size, -size, w->rank() - local}, {3});
  w->all_reduce(mine, ReduceOp::kMax)->wait();
  TS_CHECK(mine.data<int64_t>()[0] == -mine.data<int64_t>()[1], "NodeGroups: the nodes hold "
           "different numbers of ranks (", -mine.data<int64_t>()[1], " to ", mine.data<int64_t>()[0],
           "); give --ranks-per-node");
  TS_CHECK(w->rank() % size == local, "NodeGroups: rank ", w->rank(), " is local rank ", local,
           " of a ", size, "-rank node: the ranks do not fill nodes in order");
  return NodeGroups(size);
}

}  // namespace dist
}  // namespace tessera
