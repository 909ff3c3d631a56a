#include "tools/train/decentralized.h"

#include <optional>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "dist/gossip/gossip.h"
#include "dist/module_sync.h"
#include "tools/train/averaged_evaluation.h"

namespace tessera {
namespace train {

namespace {

class Decentralized : public Strategy {
 public:
  Decentralized(const Config& c, std::shared_ptr<nn::Sequential> model,
                std::shared_ptr<dist::ProcessGroup> world, Criterion criterion,
                MixedPrecision& precision)
      : model_(std::move(model)),
        world_(std::move(world)),
        criterion_(std::move(criterion)),
        precision_(precision),
        graph_(c.gossip_topology),
        gossip_(model_->parameters(), world_,
                c.gossip_topology == "exponential" ? dist::MixingMatrix::exponential(world_->size())
                                                : dist::MixingMatrix::ring(world_->size())),
        opt_(make_optimizer(c, model_->parameters())) {
    // The same initial model everywhere (the seed gives it; rank 0's, as DDP takes).
    dist::broadcast_module_states(*model_, *world_, 0, /*buffers=*/true);
  }

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    averaged_.restore(*model_);
    opt_->zero_grad();
    // The neighbours' models travel while this rank computes its gradient at its own.
    gossip_.launch();
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      precision_.autocast(autocast);
      loss = criterion_(model_->forward(Variable(inputs)), targets);
    }
    precision_.scaler().scale(loss).backward();
    gossip_.finish();  // w_i <- sum_j W_ij w_j; the caller's step subtracts lr grad_i(w_i)
    return loss.item();
  }
  Tensor predict(const Tensor& inputs) override {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;
    precision_.autocast(autocast);
    return model_->forward(Variable(inputs)).data();
  }
  // Before evaluation (and the checkpoint after it): every rank's model becomes the ranks'
  // average, this rank's own kept aside until its next training step.
  void sync_buffers() override { consensus_distance_ = averaged_.average(*model_, *world_); }
  optim::Optimizer& optimizer() override { return *opt_; }
  int replicas() const override { return world_->size(); }
  int replica() const override { return world_->rank(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override { return world_; }
  std::vector<NamedGroup> groups() const override { return {{"world", world_.get()}}; }
  std::vector<Variable> model_state_parameters() const override { return model_->parameters(); }
  void report(JsonObject& summary, bool lead) override {
    if (!lead) return;
    JsonObject d;
    d.add("graph", graph_)
        .add("lambda_2", gossip_.mixing().second_largest_eigenvalue())
        .add("elements_sent_per_step", gossip_.elements_sent_per_step())
        .add("consensus_distance", consensus_distance_)
        .add("evaluated", "the ranks' average model");
    summary.add_raw("decentralized", d.str());
  }

 private:
  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> world_;
  Criterion criterion_;
  MixedPrecision& precision_;
  std::string graph_;
  dist::GossipAverager gossip_;
  std::unique_ptr<optim::Optimizer> opt_;
  AveragedEvaluation averaged_;  // the ranks' average while evaluating
  double consensus_distance_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_decentralized(const Config& config,
                                             std::shared_ptr<nn::Sequential> model,
                                             std::shared_ptr<dist::ProcessGroup> world,
                                             Criterion criterion, MixedPrecision& precision) {
  return std::make_unique<Decentralized>(config, std::move(model), std::move(world),
                                         std::move(criterion), precision);
}

}  // namespace train
}  // namespace tessera
