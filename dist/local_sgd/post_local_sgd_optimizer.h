// PostLocalSGDOptimizer: an optimizer whose step is the inner optimizer's step followed by the
// model averager's (PyTorch's PostLocalSGDOptimizer):
//
//   step():  inner.step();  averager.average(parameters, buffers)
//
//   step k:         0     1     2     3     4     5     6     7     8     ...  (W = 1, H = 3)
//   forward via:    DDP   model model model model model model model model
//   gradients:      AR    .     .     .     .     .     .     .     .          AR: all-reduce
//   inner.step():   x     x     x     x     x     x     x     x     x
//   averager:       .     .     .     AV    .     .     AV    .     .          AV: one all-reduce
//                                                                              of the model
// With a PeriodicModelAverager this is (post-)local SGD; with DiLoCo, DiLoCo (the inner
// optimizer takes the inner steps). Being an optim::Optimizer, it goes where an optimizer
// goes: LR schedulers set its groups' options, which step() hands to the inner optimizer;
// GradScaler steps it; checkpoints save its state_dict, which holds the inner optimizer's
// entries and the averager's as "averager.<key>" (the step count, and DiLoCo's global model
// and outer optimizer), so a resumed run continues exactly, in the middle of a round too.
//
// Warm-up steps run their forward through the DDP wrapper, later steps through the model
// (model_averager.h says why):
//
//   auto model = models::MLP(784, 256, 10);
//   auto world = dist::world();
//   dist::DistributedDataParallel ddp(model, world);           // rank 0's model everywhere
//   auto averager = std::make_shared<dist::PeriodicModelAverager>(
//       world, dist::PeriodicModelAveragerOptions(/*period=*/8).warmup_steps(200));
//   dist::PostLocalSGDOptimizer opt(
//       std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.1).momentum(0.9)),
//       averager, model->buffers());
//   for (...) {
//     opt.zero_grad();
//     Variable out = opt.in_warmup() ? ddp.forward(Variable(x)) : model->forward(Variable(x));
//     cross_entropy(out, y).backward();
//     opt.step();                                              // averages every 8th local step
//   }
#pragma once

#include <memory>
#include <vector>

#include "dist/local_sgd/model_averager.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {

class PostLocalSGDOptimizer : public optim::Optimizer {
 public:
  // Collective: checks every rank holds the same parameters (names, shapes, dtypes) and gives
  // every rank rank 0's parameters and buffers, as DDP's constructor does (so the replicas
  // start equal without a DDP wrapper too). `buffers` are averaged with the parameters (pass
  // the model's buffers(); integer ones are left alone).
  PostLocalSGDOptimizer(std::unique_ptr<optim::Optimizer> inner,
                        std::shared_ptr<ModelAverager> averager,
                        std::vector<Variable> buffers = {});

  // The inner optimizer's step (with this optimizer's group options), then the averager's.
  void step() override;
  void zero_grad(bool set_to_none = true) override { inner_->zero_grad(set_to_none); }
  // Refused: the parameter groups are the inner optimizer's, fixed at construction.
  void add_param_group(optim::ParamGroup group) override;
  std::vector<Variable> gradient_variables() const override {
    return inner_->gradient_variables();
  }

  // True while the next step is a warm-up step: run its forward through DDP.
  bool in_warmup() const { return averager_->in_warmup(); }
  // Whether the last step() communicated (ended a round).
  bool communicated() const { return communicated_; }

  // The inner optimizer's entries (with this optimizer's group options) and "averager.<key>".
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  // The inner optimizer's state and the averager's (DiLoCo: global copy, outer state).
  int64_t state_bytes() const override;

  optim::Optimizer& inner() { return *inner_; }
  ModelAverager& averager() { return *averager_; }
  const ModelAverager& averager() const { return *averager_; }
  const std::vector<Variable>& buffers() const { return buffers_; }

 private:
  std::unique_ptr<optim::Optimizer> inner_;
  std::shared_ptr<ModelAverager> averager_;
  std::vector<Variable> buffers_;
  bool communicated_ = false;
};

}  // namespace dist
}  // namespace tessera
