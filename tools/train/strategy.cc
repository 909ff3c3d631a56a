#include "tools/train/strategy.h"

#include "dist/ddp.h"
#include "dist/module_sync.h"
#include "dist/zero/zero_optimizer.h"
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

// One process, or ZeRO (an optimizer that reduces gradients itself): the model runs as it is.
class Plain : public Strategy {
 public:
  Plain(std::shared_ptr<nn::Sequential> model, std::unique_ptr<optim::Optimizer> opt)
      : model_(std::move(model)), opt_(std::move(opt)) {}
  Variable forward(const Variable& x) override { return model_->forward(x); }
  optim::Optimizer& optimizer() override { return *opt_; }

 private:
  std::shared_ptr<nn::Sequential> model_;
  std::unique_ptr<optim::Optimizer> opt_;
};

// DDP: the wrapped model averages gradients during backward; the optimizer is an ordinary one.
class Ddp : public Strategy {
 public:
  Ddp(const Config& c, std::shared_ptr<nn::Sequential> model,
      std::shared_ptr<dist::ProcessGroup> world)
      : ddp_(model, std::move(world)), opt_(make_optimizer(c, model->parameters())) {}
  Variable forward(const Variable& x) override { return ddp_.forward(x); }
  optim::Optimizer& optimizer() override { return *opt_; }

 private:
  dist::DistributedDataParallel ddp_;
  std::unique_ptr<optim::Optimizer> opt_;
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world) {
  if (config.strategy == "ddp") return std::make_unique<Ddp>(config, model, world);
  if (config.strategy == "zero1" || config.strategy == "zero2") {
    const int stage = config.strategy == "zero1" ? 1 : 2;
    auto zero = std::make_unique<dist::ZeroRedundancyOptimizer>(
        model->parameters(), world,
        [config](std::vector<Variable> shard) { return make_optimizer(config, std::move(shard)); },
        dist::ZeroOptions().stage(stage));
    return std::make_unique<Plain>(model, std::move(zero));
  }
  return std::make_unique<Plain>(model, make_optimizer(config, model->parameters()));
}

}  // namespace train
}  // namespace tessera
