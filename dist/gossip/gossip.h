// Decentralized SGD (D-PSGD, Lian et al. 2017): no all-reduce, no parameter server; every
// worker averages its model with its neighbours' (a MixingMatrix W) and takes its own gradient
// step:
//
//   w_i <- sum_j W_ij w_j - lr grad_i(w_i)
//
// GossipAverager does the first term with point-to-point messages: each step every rank sends
// its parameters (one flat copy) to its out-neighbours and receives its in-neighbours'. The
// gradient is taken at the rank's own w_i, which does not depend on the messages, so the
// exchange overlaps forward and backward:
//
//   launch()  post sends of w_i to out-neighbours, receives from in-neighbours  (comm starts)
//   forward, backward at w_i                                                    (overlaps)
//   finish()  wait; w_i <- sum_j W_ij w_j                                       (the mixing)
//   optimizer.step()  w_i <- w_i - lr grad_i  (plain SGD: D-PSGD exactly)
//
// Bytes per step per rank: (out-degree) x psi x element size: 2 psi f32 on a ring of n >= 3,
// 1 on 2 ranks, ceil(log2 n) on the exponential graph, whatever n; a ring all-reduce sends
// 2 (N-1)/N psi but waits on O(N) latencies in sequence. The models differ between ranks
// (evaluate the average, dist::all_reduce of the parameters, and say so).
#pragma once

#include <memory>
#include <vector>

#include "autograd/variable.h"
#include "dist/gossip/mixing_matrix.h"
#include "dist/process_group.h"
#include "dist/work.h"

namespace tessera {
namespace dist {

class GossipAverager {
 public:
  // `params`: this rank's (one floating dtype); `mixing` of the group's size.
  GossipAverager(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                 MixingMatrix mixing);
  // Posts this step's sends and receives (every rank of the group, every step).
  void launch();
  // Waits for them and replaces the parameters by the mixed model sum_j W_ij w_j.
  void finish();
  // Elements sent per step by this rank.
  int64_t elements_sent_per_step() const;
  const MixingMatrix& mixing() const { return mixing_; }

 private:
  Tensor flatten() const;
  std::vector<Variable> params_;
  std::shared_ptr<ProcessGroup> group_;
  MixingMatrix mixing_;
  std::vector<int> in_, out_;
  int64_t numel_ = 0;
  DType dtype_;
  Tensor sent_;                          // this step's flat copy of w_i
  std::vector<Tensor> received_;         // per in-neighbour
  std::vector<std::shared_ptr<Work>> works_;
  bool launched_ = false;
};

}  // namespace dist
}  // namespace tessera
