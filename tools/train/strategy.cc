#include "tools/train/strategy.h"

#include "dist/ddp.h"
#include "dist/module_sync.h"
#include "dist/zero_optimizer.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace tessera {
namespace train {

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Variable> params) {
  if (c.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay)
                    .nesterov(c.momentum > 0));
  }
  if (c.optimizer == "adam") {
    return std::make_unique<optim::Adam>(params,
                                         optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  }
  return std::make_unique<optim::AdamW>(
      params, optim::AdamWOptions(c.lr).weight_decay(c.weight_decay == 0 ? 1e-2 : c.weight_decay));
}

class Single : public Strategy {
 public:
  Single(const Config& c, std::shared_ptr<nn::Sequential> model)
      : model_(std::move(model)), opt_(make_optimizer(c, model_->parameters())) {}
  Variable forward(const Variable& x) override { return model_->forward(x); }
  void zero_grad() override { opt_->zero_grad(); }
  void step() override { opt_->step(); }
  optim::Optimizer& scheduled_optimizer() override { return *opt_; }
  StateDict optimizer_state() override { return opt_->state_dict(); }
  void load_optimizer_state(const StateDict& s) override { opt_->load_state_dict(s); }
  int64_t optimizer_state_bytes() const override { return opt_->state_bytes(); }

 protected:
  std::shared_ptr<nn::Sequential> model_;
  std::unique_ptr<optim::Optimizer> opt_;
};

// DDP: the wrapped model averages gradients during backward; the optimizer is an ordinary one.
class Ddp : public Single {
 public:
  Ddp(const Config& c, std::shared_ptr<nn::Sequential> model,
      std::shared_ptr<dist::ProcessGroup> world)
      : Single(c, model), ddp_(model, std::move(world)) {}
  Variable forward(const Variable& x) override { return ddp_.forward(x); }

 private:
  dist::DistributedDataParallel ddp_;
};

// ZeRO-1: local backward, then the sharded optimizer reduce-scatters, steps its shard and
// all-gathers. Buffers (BatchNorm statistics) follow rank 0's, as with DDP.
class Zero1 : public Strategy {
 public:
  Zero1(const Config& c, std::shared_ptr<nn::Sequential> model,
        std::shared_ptr<dist::ProcessGroup> world)
      : model_(std::move(model)), world_(std::move(world)) {
    dist::verify_same_parameters(*model_, *world_);
    dist::broadcast_module_states(*model_, *world_);
    zero_ = std::make_unique<dist::ZeroRedundancyOptimizer>(
        model_->parameters(), world_,
        [c](std::vector<Variable> shard) { return make_optimizer(c, std::move(shard)); });
  }
  Variable forward(const Variable& x) override {
    dist::broadcast_buffers(*model_, *world_);
    return model_->forward(x);
  }
  void zero_grad() override { zero_->zero_grad(); }
  void step() override { zero_->step(); }
  optim::Optimizer& scheduled_optimizer() override { return zero_->inner(); }
  StateDict optimizer_state() override { return zero_->consolidated_state_dict(); }
  void load_optimizer_state(const StateDict& s) override { zero_->load_state_dict(s); }
  int64_t optimizer_state_bytes() const override { return zero_->state_bytes(); }

 private:
  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> world_;
  std::unique_ptr<dist::ZeroRedundancyOptimizer> zero_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world) {
  if (config.strategy == "ddp") return std::make_unique<Ddp>(config, model, world);
  if (config.strategy == "zero1") return std::make_unique<Zero1>(config, model, world);
  return std::make_unique<Single>(config, model);
}

}  // namespace train
}  // namespace tessera
