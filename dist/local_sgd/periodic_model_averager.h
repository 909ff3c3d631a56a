// PeriodicModelAverager: local SGD (Lin et al. 2020, "Don't Use Large Mini-Batches, Use Local
// SGD"; PyTorch's PeriodicModelAverager). Each rank steps its own replica on its own batches,
// and every H = `period` steps the replicas are replaced by their mean: parameters and buffers
// (BatchNorm's running statistics), one flat all-reduce per dtype. After `warmup_steps` plain
// DDP steps this is post-local SGD: large steps early, when the model moves fastest, are taken
// together; later ones locally.
//
//   rank 0:  w --g--> w --g--> w --g--> w --g--> w -.                .-> w --g--> ...
//   rank 1:  w --g--> w --g--> w --g--> w --g--> w -+- mean (1 AR) --+-> w --g--> ...
//   rank 2:  w --g--> w --g--> w --g--> w --g--> w -'   psi elements  '-> w --g--> ...
//            '---------------- H = 4 local steps ----------------'
//
// (Schedule with warm-up, and how warm-up runs under DDP: model_averager.h.)
//
// Communication: one all-reduce of psi (+ buffer) elements every H steps, nothing in between:
// 1/H of DDP's volume, and 1/H of its latency, the point of the method on a slow network.
// With H = 1 and plain SGD it is DDP: averaging w_i - lr g_i over ranks gives w - lr mean(g_i),
// because SGD's step is linear in the gradient. Optimizer state (momentum, Adam's moments)
// stays local, as in PyTorch.
//
//   auto averager = std::make_shared<dist::PeriodicModelAverager>(
//       world, dist::PeriodicModelAveragerOptions(/*period=*/4).warmup_steps(100));
//   dist::PostLocalSGDOptimizer opt(std::make_unique<optim::SGD>(...), averager, model->buffers());
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/local_sgd/model_averager.h"

namespace tessera {
namespace dist {

class PeriodicModelAveragerOptions {
 public:
  explicit PeriodicModelAveragerOptions(int64_t period) : period_(period) {}
  // H: local steps per round (>= 1).
  PeriodicModelAveragerOptions& period(int64_t h) { period_ = h; return *this; }
  // Plain DDP steps before the first local one (>= 0).
  PeriodicModelAveragerOptions& warmup_steps(int64_t w) { warmup_steps_ = w; return *this; }
  // Measure the consensus distance before each averaging (one more all-reduce of an f64).
  PeriodicModelAveragerOptions& measure_consensus_distance(bool m) { measure_ = m; return *this; }
  int64_t period() const { return period_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  bool measure_consensus_distance() const { return measure_; }

 private:
  int64_t period_, warmup_steps_ = 0;
  bool measure_ = false;
};

class PeriodicModelAverager : public ModelAverager {
 public:
  // Throws, naming the value, on a period < 1, warmup_steps < 0 or a null group.
  PeriodicModelAverager(std::shared_ptr<ProcessGroup> group,
                        const PeriodicModelAveragerOptions& options);

  std::string name() const override { return "PeriodicModelAverager"; }
  bool average(const std::vector<Variable>& params,
               const std::vector<Variable>& buffers = {}) override;
};

}  // namespace dist
}  // namespace tessera
