// DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of Language
// Models"): local SGD whose averaging is itself an optimizer step. Every rank keeps a copy of
// the global model theta (the "backup copy"); each round it takes H inner steps from theta
// with its own inner optimizer (the paper: AdamW), then
//
//   Delta_i = theta - theta_i           the pseudo-gradient: the global model before the round
//                                       minus rank i's local model now
//   Delta   = 1/N sum_i Delta_i         one all-reduce (mean) of psi elements per dtype
//   theta  <- OuterOpt(theta, Delta)    Delta given to the outer optimizer as theta's gradient
//                                       (the paper: Nesterov SGD, lr 0.7, momentum 0.9)
//   theta_i <- theta                    every rank starts the next round from the new theta
//
//   theta ============================================> theta' = OuterOpt(theta, Delta) ==> ...
//     |  (every rank's backup copy)                           ^                     |
//     v                                                       |                     v
//   rank 0: theta --inner--> ... --inner--> theta_0   theta - theta_0 --.       theta_0 = theta'
//   rank 1: theta --inner--> ... --inner--> theta_1   theta - theta_1 --+-- mean (1 AR) -> Delta
//   rank 2: theta --inner--> ... --inner--> theta_2   theta - theta_2 --'
//           '--------- H inner steps ---------'
//
// The sign convention: Delta = theta_global - theta_local, pointing *against* where the local
// steps went, as a gradient does, so the outer optimizer descends along it as along any
// gradient. With outer SGD, lr 1 and no momentum,
//   theta - 1 * Delta = theta - (theta - mean_i theta_i) = mean_i theta_i:
// plain model averaging, i.e. PeriodicModelAverager with period H (tested). An outer lr below
// 1 moves part of the way; momentum and Nesterov carry the direction across rounds.
//
// Buffers (BatchNorm's running statistics) are not trained by gradients: they ride in the same
// flat all-reduce and are simply averaged. Warm-up (plain DDP steps before the first round)
// and the schedule are model_averager.h's; at the end of warm-up the global copy is refreshed
// from the (then identical) replicas. Memory: the global copy (psi) and the outer optimizer's
// state (psi more for momentum), reported by state_bytes().
//
//   auto diloco = std::make_shared<dist::DiLoCo>(model->parameters(), model->buffers(), world,
//       dist::nesterov_outer_optimizer(0.7, 0.9), dist::DiLoCoOptions(/*inner_steps=*/500));
//   dist::PostLocalSGDOptimizer opt(std::make_unique<optim::AdamW>(...), diloco, model->buffers());
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/local_sgd/model_averager.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {

class DiLoCoOptions {
 public:
  explicit DiLoCoOptions(int64_t inner_steps) : inner_steps_(inner_steps) {}
  // H: inner steps per round (>= 1).
  DiLoCoOptions& inner_steps(int64_t h) { inner_steps_ = h; return *this; }
  // Plain DDP steps before the first round (>= 0).
  DiLoCoOptions& warmup_steps(int64_t w) { warmup_steps_ = w; return *this; }
  // Measure the consensus distance before each outer step (one more all-reduce of an f64).
  DiLoCoOptions& measure_consensus_distance(bool m) { measure_ = m; return *this; }
  int64_t inner_steps() const { return inner_steps_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  bool measure_consensus_distance() const { return measure_; }

 private:
  int64_t inner_steps_, warmup_steps_ = 0;
  bool measure_ = false;
};

// Builds the outer optimizer over the global copy's Variables (any optim::Optimizer).
using OuterOptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable> global_parameters)>;
// The paper's outer optimizer: SGD with Nesterov momentum.
OuterOptimizerFactory nesterov_outer_optimizer(double lr = 0.7, double momentum = 0.9);

class DiLoCo : public ModelAverager {
 public:
  // Collective: like DDP, checks every rank lists the same parameters (names, shapes, dtypes)
  // and gives every rank rank 0's parameters and buffers; then copies them as the global model.
  // `params` and `buffers` are the ones average() will be given (the model's, in its order).
  // Throws, naming the value, on bad options, a null group or factory.
  DiLoCo(std::vector<Variable> params, std::vector<Variable> buffers,
         std::shared_ptr<ProcessGroup> group, const OuterOptimizerFactory& make_outer_optimizer,
         const DiLoCoOptions& options);

  std::string name() const override { return "DiLoCo"; }
  // After every inner step; the outer step at the end of each round. `params` and `buffers`
  // must be the constructor's (the same Variables in the same order).
  bool average(const std::vector<Variable>& params,
               const std::vector<Variable>& buffers = {}) override;

  // The global model theta (the last round's result), one Variable per parameter.
  const std::vector<Variable>& global_parameters() const { return global_; }
  optim::Optimizer& outer_optimizer() { return *outer_; }
  const optim::Optimizer& outer_optimizer() const { return *outer_; }

  // "step", "global.I" (the global copy of parameter I: the tensors themselves) and
  // "outer.<key>" (the outer optimizer's state_dict).
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  int64_t state_bytes() const override;

 private:
  void check_same(const std::vector<Variable>& params, const std::vector<Variable>& buffers) const;
  void outer_step();

  std::vector<Variable> params_, buffers_;
  std::vector<Variable> float_buffers_;  // the averaged ones
  std::vector<Variable> global_;
  std::unique_ptr<optim::Optimizer> outer_;
};

}  // namespace dist
}  // namespace tessera
