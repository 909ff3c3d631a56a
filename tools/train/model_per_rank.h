// The strategies in which every rank trains its own copy of the whole model (local SGD, gossip):
// each rank reads its own shard of the data, and evaluation (and the checkpoint after it) uses
// the ranks' average model (averaged_evaluation.h), restored to each rank's own at its next step.
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

 protected:
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
