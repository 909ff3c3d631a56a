// The strategies in which every rank trains its own copy of the whole model (local SGD, gossip):
// each rank reads its own shard of the data, and evaluation (and the checkpoint after it) uses
// the ranks' average model (averaged_evaluation.h), restored to each rank's own at its next step.
//
// Checkpoints: the "model" part is the ranks' average (what was evaluated, and what any other
// strategy resumes from), the "optimizer" part rank 0's optimizer state (with local SGD's
// averager: the step within the round, DiLoCo's outer optimizer and global copy, the same on
// every rank). A resume inside a round (gossip has no round's end) needs each rank's own, so
// every rank's own model (before averaging) and own optimizer state are gathered into the
// extra tensors, "rank.R.model.NAME" and "rank.R.optimizer.KEY", and a resume on the same
// world size gives each rank its own back: the run continues exactly. On another world size
// every rank starts from the average model and rank 0's optimizer state, and says so.
#pragma once

#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "nn/sequential.h"
#include "tools/train/autocast_forward.h"
#include "tools/train/averaged_evaluation.h"
#include "tools/train/precision.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

class ModelPerRank : public Strategy {
 public:
  ModelPerRank(std::shared_ptr<nn::Sequential> model, std::shared_ptr<dist::ProcessGroup> world,
               Criterion criterion, MixedPrecision& precision)
      : model_(std::move(model)), world_(std::move(world)), criterion_(std::move(criterion)),
        precision_(precision) {}

  Tensor predict(const Tensor& inputs) override {
    return autocast_predict(precision_, [this](const Variable& x) { return model_->forward(x); },
                            inputs);
  }
  // Before evaluation: the ranks' average model, and the consensus distance before averaging.
  void sync_buffers() override { evaluated_distance_ = averaged_.average(*model_, *world_); }
  int replicas() const override { return world_->size(); }
  int replica() const override { return world_->rank(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override { return world_; }
  std::vector<NamedGroup> groups() const override { return {{"world", world_.get()}}; }
  std::vector<Variable> model_state_parameters() const override { return model_->parameters(); }
  // Local SGD and gossip communicate every H steps or with neighbours only: no per-step
  // all-reduce of the NaN check over the world (each rank checks its own).
  bool checks_steps_over_world() const override { return false; }
  // Collective: every rank's own model and optimizer state; and its inverse.
  StateDict extra_state() override;
  void load_extra_state(const Checkpoint& checkpoint, bool lead) override;

 protected:
  // The optimizer whose state is this rank's own (local SGD: the inner one; its averager's
  // state is every rank's alike and in the checkpoint's optimizer part).
  virtual optim::Optimizer& own_optimizer() = 0;
  // A training step starts from this rank's own model (not the average evaluated last).
  void restore_own_model() { averaged_.restore(*model_); }

  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> world_;
  Criterion criterion_;
  MixedPrecision& precision_;
  double evaluated_distance_ = 0;  // at the last evaluation

 private:
  AveragedEvaluation averaged_;
};

}  // namespace train
}  // namespace tessera
