#include "tools/train/decentralized.h"

#include <vector>

#include "dist/gossip/gossip.h"
#include "dist/module_sync.h"
#include "tools/train/model_per_rank.h"

namespace tessera {
namespace train {

namespace {

class Decentralized : public ModelPerRank {
 public:
  Decentralized(const Config& c, std::shared_ptr<nn::Sequential> model,
                std::shared_ptr<dist::ProcessGroup> world, Criterion criterion,
                MixedPrecision& precision)
      : ModelPerRank(std::move(model), std::move(world), std::move(criterion), precision),
        graph_(c.gossip_topology),
        gossip_(model_->parameters(), world_,
                c.gossip_topology == "exponential" ? dist::MixingMatrix::exponential(world_->size())
                                                : dist::MixingMatrix::ring(world_->size())),
        opt_(make_optimizer(c, model_->parameters(), *model_)) {
    // The same initial model everywhere (the seed gives it; rank 0's, as DDP takes).
    dist::broadcast_module_states(*model_, *world_, 0, /*buffers=*/true);
  }

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    restore_own_model();
    opt_->zero_grad();
    // The neighbours' models travel while this rank computes its gradient at its own.
    gossip_.launch();
    const Variable loss = autocast_loss(
        precision_, [this](const Variable& x) { return model_->forward(x); }, criterion_, inputs,
        targets);
    precision_.scaler().scale(loss).backward();
    gossip_.finish();  // w_i <- sum_j W_ij w_j; the caller's step subtracts lr grad_i(w_i)
    return loss.item();
  }
  optim::Optimizer& optimizer() override { return *opt_; }
  optim::Optimizer& own_optimizer() override { return *opt_; }
  void report(json::Object& summary, bool lead) override {
    if (!lead) return;
    json::Object d;
    d.add("graph", graph_)
        .add("lambda_2", gossip_.mixing().second_largest_eigenvalue())
        .add("elements_sent_per_step", gossip_.elements_sent_per_step())
        .add("consensus_distance", evaluated_distance_)
        .add("evaluated", "the ranks' average model");
    summary.add_raw("decentralized", d.str());
  }

 private:
  std::string graph_;
  dist::GossipAverager gossip_;
  std::unique_ptr<optim::Optimizer> opt_;
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
