#include "tools/train/local_sgd.h"

#include <vector>

#include "dist/ddp/ddp.h"
#include "dist/local_sgd/diloco.h"
#include "dist/local_sgd/periodic_model_averager.h"
#include "dist/local_sgd/post_local_sgd_optimizer.h"
#include "tools/train/model_per_rank.h"

namespace tessera {
namespace train {

namespace {

std::shared_ptr<dist::ModelAverager> make_averager(const Config& c, nn::Module& model,
                                                   std::shared_ptr<dist::ProcessGroup> world) {
  if (c.outer_optimizer == "nesterov") {
    return std::make_shared<dist::DiLoCo>(
        model.parameters(), model.buffers(), world,
        dist::nesterov_outer_optimizer(c.outer_lr, c.outer_momentum),
        dist::DiLoCoOptions(c.sync_period).warmup_steps(c.local_sgd_warmup).measure_consensus_distance(true));
  }
  return std::make_shared<dist::PeriodicModelAverager>(
      world, dist::PeriodicModelAveragerOptions(c.sync_period)
                 .warmup_steps(c.local_sgd_warmup)
                 .measure_consensus_distance(true));
}

class LocalSgd : public ModelPerRank {
 public:
  LocalSgd(const Config& c, std::shared_ptr<nn::Sequential> model,
           std::shared_ptr<dist::ProcessGroup> world, Criterion criterion,
           MixedPrecision& precision)
      : ModelPerRank(std::move(model), std::move(world), std::move(criterion), precision),
        config_(c),
        ddp_(model_, world_),  // the warm-up steps' gradient all-reduce
        averager_(make_averager(c, *model_, world_)),
        opt_(make_optimizer(c, model_->parameters(), *model_), averager_, model_->buffers()) {}

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    restore_own_model();
    // Warm-up steps through DDP (gradients averaged); local steps through the model itself.
    const Variable loss = autocast_loss(
        precision_,
        [this](const Variable& x) { return opt_.in_warmup() ? ddp_.forward(x) : model_->forward(x); },
        criterion_, inputs, targets);
    opt_.zero_grad();
    precision_.scaler().scale(loss).backward();
    return loss.item();
  }
  optim::Optimizer& optimizer() override { return opt_; }
  optim::Optimizer& own_optimizer() override { return opt_.inner(); }
  void report(json::Object& summary, bool lead) override {
    if (!lead) return;
    json::Object l;
    l.add("sync_period", config_.sync_period)
        .add("warmup_steps", config_.local_sgd_warmup)
        .add("outer_optimizer", config_.outer_optimizer)
        .add("consensus_distance", averager_->consensus_distance())
        .add("consensus_distance_at_evaluation", evaluated_distance_)
        .add("evaluated", "the ranks' average model");
    summary.add_raw("local_sgd", l.str());
  }

 private:
  Config config_;
  dist::DistributedDataParallel ddp_;
  std::shared_ptr<dist::ModelAverager> averager_;
  dist::PostLocalSGDOptimizer opt_;
};

}  // namespace

std::unique_ptr<Strategy> make_local_sgd(const Config& config, std::shared_ptr<nn::Sequential> model,
                                         std::shared_ptr<dist::ProcessGroup> world,
                                         Criterion criterion, MixedPrecision& precision) {
  return std::make_unique<LocalSgd>(config, std::move(model), std::move(world),
                                    std::move(criterion), precision);
}

}  // namespace train
}  // namespace tessera
