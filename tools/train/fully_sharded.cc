#include "tools/train/fully_sharded.h"

#include <cmath>
#include <optional>

#include "dist/module_sync.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/fully_sharded_optimizer_state.h"
#include "dist/zero/sharded_checkpoint.h"
#include "tools/train/autocast_forward.h"
#include "tools/train/offload.h"
#include "tools/train/collectives.h"

namespace tessera {
namespace train {

namespace {

// Under --amp, ZeRO-3 gathers its units in the autocast dtype (so autocast caches no casts of
// them) and averages gradients in f32, as DDP's f32 gradients are.
dist::MixedPrecision unit_precision(const MixedPrecision& precision) {
  if (!precision.autocast_enabled()) return dist::MixedPrecision();
  return dist::MixedPrecision().param_dtype(precision.autocast_dtype()).reduce_dtype(kF32);
}

// ZeRO-3: the model's parameters live as flat shards (dist::FullyShardedDataParallel gathers
// each unit around its forward and backward; a GPT's tied token embedding in the root unit,
// which encloses both its uses); the optimizer steps this rank's shards cut by the parameter
// groups (dist::zero::GroupedShardOptimizer: a GPT's decay and no-decay groups). Full
// checkpoints hold the whole model and the optimizer's state, both gathered into the unsplit
// model's format (dist/zero/fully_sharded_optimizer_state.h), so one process, DDP, ZeRO-1/2 and
// ZeRO-3 on any world size resume from them; sharded ones keep both per shard.
class FullySharded : public Strategy {
 public:
  FullySharded(const Config& c, std::shared_ptr<nn::Sequential> model,
               std::shared_ptr<dist::ProcessGroup> world, Criterion criterion,
               MixedPrecision& precision)
      : model_(model),
        world_(world),
        hierarchical_(c.collectives == "hierarchical"
                          ? std::optional<HierarchicalCollectives>(std::in_place, c)
                          : std::nullopt),
        // Before sharding: the groups read the parameters' shapes (a GPT decays its matrices).
        groups_(make_param_groups(c, model->parameters(), *model)),
        fsdp_(std::move(model),
              hierarchical_ ? std::shared_ptr<dist::ProcessGroup>(hierarchical_->group(world))
                            : std::move(world),
              dist::FullyShardedOptions()
                  .min_num_params(c.zero3_min_params)
                  .wrap_layers(c.zero3_wrap_layers)
                  .prefetch_limit(c.zero3_prefetch ? 1 : 0)
                  .mixed_precision(unit_precision(precision))
                  .offload(offload_of(c))),
        opt_(std::make_unique<dist::zero::GroupedShardOptimizer>(
            fsdp_.flat_shards(), groups_,
            [c](std::vector<optim::ParamGroup> pieces) { return make_optimizer(c, std::move(pieces)); },
            offload_of(c))),
        criterion_(std::move(criterion)),
        precision_(precision) {}

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    const Variable loss = autocast_loss(
        precision_, [this](const Variable& x) { return fsdp_.forward(x); }, criterion_, inputs,
        targets);
    opt_->zero_grad();
    precision_.scaler().scale(loss).backward();
    ++steps_;
    return loss.item();
  }
  Tensor predict(const Tensor& inputs) override {
    return autocast_predict(precision_, [this](const Variable& x) { return fsdp_.forward(x); },
                            inputs);
  }
  void report(json::Object& summary, bool lead) override {
    if (hierarchical_ && lead) hierarchical_->report(summary, steps_);
    if (lead) report_offload(summary, *opt_, &fsdp_);
  }
  optim::Optimizer& optimizer() override { return *opt_; }
  double clip_grad_norm(double max_norm) override { return fsdp_.clip_grad_norm(max_norm); }
  // The shards' gradients, offloaded ones included (their homes keep the sums of squares).
  double local_gradient_norm() override { return std::sqrt(fsdp_.local_grad_squared_sum()); }
  int replicas() const override { return world_->size(); }
  int replica() const override { return world_->rank(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override { return world_; }
  void sync_buffers() override { dist::sync_buffers(*model_, *world_); }
  StateDict model_state(const nn::Module&) override { return fsdp_.state_dict(); }
  void load_model_state(nn::Module&, const Checkpoint& checkpoint) override {
    fsdp_.load_state_dict(checkpoint.model);
  }
  StateDict optimizer_state() override { return dist::zero::gather_optimizer_state(fsdp_, *opt_); }
  // After load_model_state: f16/bf16 units' masters go into the shards.
  void load_optimizer_state(const Checkpoint& checkpoint) override {
    dist::zero::load_optimizer_state(checkpoint.optimizer, fsdp_, *opt_);
  }
  void save_sharded(const std::string& dir, const TrainingProgress& progress,
                    const Metadata& extra) override {
    dist::zero::save_sharded_checkpoint(dir, fsdp_, opt_.get(), progress, extra);
  }
  TrainingProgress load_sharded(const std::string& dir, Metadata* extra) override {
    return dist::zero::load_sharded_checkpoint(dir, fsdp_, opt_.get(), extra);
  }
  std::vector<NamedGroup> groups() const override {
    if (!hierarchical_) return {{"world", world_.get()}};
    return {{"world", world_.get()},
            {"intra-node", hierarchical_->intra_node()},
            {"inter-node", hierarchical_->inter_node()}};
  }
  // The shards, and the model's own parameters (released outside forward and backward: their
  // storages count only if a unit failed to free them).
  std::vector<Variable> model_state_parameters() const override {
    std::vector<Variable> all = fsdp_.shard_parameters();
    for (const Variable& p : model_->parameters()) all.push_back(p);
    return all;
  }

 private:
  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> world_;
  std::optional<HierarchicalCollectives> hierarchical_;  // --collectives=hierarchical
  std::vector<optim::ParamGroup> groups_;  // over the model's parameters
  dist::FullyShardedDataParallel fsdp_;
  std::unique_ptr<optim::Optimizer> opt_;
  Criterion criterion_;
  MixedPrecision& precision_;
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_fully_sharded(const Config& config,
                                             std::shared_ptr<nn::Sequential> model,
                                             std::shared_ptr<dist::ProcessGroup> world,
                                             Criterion criterion, MixedPrecision& precision) {
  return std::make_unique<FullySharded>(config, std::move(model), std::move(world),
                                        std::move(criterion), precision);
}

}  // namespace train
}  // namespace tessera
