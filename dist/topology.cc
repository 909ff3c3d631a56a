#include "dist/topology.h"

#include <functional>
#include <vector>

#include "dist/environment.h"

namespace tessera {
namespace dist {

namespace {

// One rank's coordinates in the grid (topology.h's order).
struct Place {
  int stage, replica, cp, tp;
};

}  // namespace

Topology::Topology(std::shared_ptr<ProcessGroup> world, int pipeline_stages,
                   int tensor_parallel_size, int context_parallel_size)
    : world_(std::move(world)),
      stages_(pipeline_stages),
      tp_size_(tensor_parallel_size),
      cp_size_(context_parallel_size) {
  const int n = world_->size();
  TS_CHECK(pipeline_stages >= 1 && tensor_parallel_size >= 1 && context_parallel_size >= 1 &&
               n % (pipeline_stages * tensor_parallel_size * context_parallel_size) == 0,
           "Topology: ", n, " ranks cannot be split into ", pipeline_stages,
           " pipeline stages x ", context_parallel_size, " context-parallel ranks x ",
           tensor_parallel_size, " tensor-parallel ranks x a whole number of data-parallel "
           "replicas");
  replicas_ = n / (stages_ * cp_size_ * tp_size_);
  const auto rank_of = [&](const Place& p) {
    return ((p.stage * replicas_ + p.replica) * cp_size_ + p.cp) * tp_size_ + p.tp;
  };
  const auto place_of = [&](int rank) {
    return Place{rank / (tp_size_ * cp_size_ * replicas_), (rank / (tp_size_ * cp_size_)) % replicas_,
                 (rank / tp_size_) % cp_size_, rank % tp_size_};
  };
  const int me = world_->rank();
  const Place mine = place_of(me);
  stage_ = mine.stage, replica_ = mine.replica, cp_rank_ = mine.cp, tp_rank_ = mine.tp;

  // One kind of group: the ranks that differ from each other only in the coordinates `varies`
  // changes, one group for every setting of the others. Group creation is collective over the
  // world: every rank creates every group, in one order, keeping its own.
  using Vary = std::function<std::vector<Place>(const Place&)>;
  const auto make_groups = [&](const Vary& varies) {
    std::shared_ptr<ProcessGroup> own;
    std::vector<bool> done(n, false);
    for (int r = 0; r < n; ++r) {
      if (done[r]) continue;
      std::vector<int> ranks;
      bool holds_me = false;
      for (const Place& q : varies(place_of(r))) {
        const int k = rank_of(q);
        ranks.push_back(k);
        done[k] = true;
        holds_me = holds_me || k == me;
      }
      auto g = new_group(ranks);
      if (holds_me) own = g;
    }
    return own;
  };
  data_parallel_ = make_groups([&](const Place& p) {
    std::vector<Place> out;
    for (int d = 0; d < replicas_; ++d) {
      for (int c = 0; c < cp_size_; ++c) out.push_back({p.stage, d, c, p.tp});
    }
    return out;
  });
  replicas_group_ = cp_size_ == 1 ? data_parallel_ : make_groups([&](const Place& p) {
    std::vector<Place> out;
    for (int d = 0; d < replicas_; ++d) out.push_back({p.stage, d, p.cp, p.tp});
    return out;
  });
  pipeline_ = make_groups([&](const Place& p) {
    std::vector<Place> out;
    for (int s = 0; s < stages_; ++s) out.push_back({s, p.replica, p.cp, p.tp});
    return out;
  });
  tensor_parallel_ = make_groups([&](const Place& p) {
    std::vector<Place> out;
    for (int t = 0; t < tp_size_; ++t) out.push_back({p.stage, p.replica, p.cp, t});
    return out;
  });
  context_parallel_ = make_groups([&](const Place& p) {
    std::vector<Place> out;
    for (int c = 0; c < cp_size_; ++c) out.push_back({p.stage, p.replica, c, p.tp});
    return out;
  });
}

}  // namespace dist
}  // namespace tessera
