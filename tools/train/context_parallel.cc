#include "tools/train/context_parallel.h"

#include "dist/context_parallel/gather_sequence.h"
#include "dist/context_parallel/parallelize_context.h"
#include "tensor/ops.h"

namespace tessera {
namespace train {

namespace cp = dist::context_parallel;

namespace {

constexpr cp::SequenceSplit kSplit = cp::SequenceSplit::kHeadTail;

class ContextParallel : public Strategy {
 public:
  ContextParallel(const Config& c, std::unique_ptr<Strategy> inner,
                  std::shared_ptr<nn::Sequential> model, const ContextParallelLayout& layout)
      : inner_(std::move(inner)),
        model_(std::move(model)),
        layout_(layout),
        averages_gradients_(c.strategy != "single") {}

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    const double loss = inner_->train_step(mine(inputs), mine(targets));
    dist::ProcessGroup& group = *layout_.context_parallel;
    if (!averages_gradients_) {
      // One replica, no DDP or ZeRO: the average over the cp ranks is this rank's to take.
      for (const Variable& p : model_->parameters()) {
        Tensor g = p.grad();
        if (g.defined()) group.all_reduce(g, ReduceOp::kMean)->wait();
      }
    }
    // The mean over the whole sequence's tokens: the mean of the ranks' means.
    Tensor mean = scalar_tensor(loss, kF64);
    group.all_reduce(mean, ReduceOp::kMean)->wait();
    return mean.item();
  }
  Tensor predict(const Tensor& inputs) override {
    return cp::gather_sequence(inner_->predict(mine(inputs)), 1, *layout_.context_parallel, kSplit);
  }
  optim::Optimizer& optimizer() override { return inner_->optimizer(); }
  int replicas() const override { return layout_.replica_count; }
  int replica() const override { return layout_.replica; }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override {
    return layout_.replicas;
  }
  void sync_buffers() override { inner_->sync_buffers(); }
  StateDict model_state(const nn::Module& model) override { return inner_->model_state(model); }
  void load_model_state(nn::Module& model, const Checkpoint& checkpoint) override {
    inner_->load_model_state(model, checkpoint);
  }
  bool checkpoints_optimizer() const override { return inner_->checkpoints_optimizer(); }
  StateDict optimizer_state() override { return inner_->optimizer_state(); }
  void load_optimizer_state(const Checkpoint& checkpoint) override {
    inner_->load_optimizer_state(checkpoint);
  }
  void save_sharded(const std::string& dir, const TrainingProgress& progress,
                    const Metadata& extra) override {
    inner_->save_sharded(dir, progress, extra);
  }
  TrainingProgress load_sharded(const std::string& dir, Metadata* extra) override {
    return inner_->load_sharded(dir, extra);
  }
  StateDict extra_state() override { return inner_->extra_state(); }
  void load_extra_state(const Checkpoint& checkpoint, bool lead) override {
    inner_->load_extra_state(checkpoint, lead);
  }
  void report(json::Object& summary, bool lead) override {
    inner_->report(summary, lead);
    if (lead) summary.add("context_parallel", layout_.context_parallel->size());
  }
  double clip_grad_norm(double max_norm) override { return inner_->clip_grad_norm(max_norm); }
  void after_step() override { inner_->after_step(); }
  bool checks_steps_over_world() const override { return inner_->checks_steps_over_world(); }
  std::vector<NamedGroup> groups() const override {
    std::vector<NamedGroup> out = inner_->groups();
    out.push_back({"context-parallel", layout_.context_parallel.get()});
    return out;
  }
  std::vector<Variable> model_state_parameters() const override {
    return inner_->model_state_parameters();
  }

 private:
  // This rank's chunks of every sequence of a batch [B, T].
  Tensor mine(const Tensor& x) const {
    const dist::ProcessGroup& g = *layout_.context_parallel;
    return cp::rank_rows(x, 1, g.rank(), g.size(), kSplit);
  }

  std::unique_ptr<Strategy> inner_;
  std::shared_ptr<nn::Sequential> model_;
  ContextParallelLayout layout_;
  bool averages_gradients_;  // DDP's all-reduce or ZeRO's reduce-scatter over the world
};

}  // namespace

ContextParallelLayout make_context_parallel_layout(const dist::Topology& grid,
                                                   const std::string& algorithm) {
  ContextParallelLayout layout;
  layout.context_parallel = grid.context_parallel_group();
  layout.replicas = grid.replica_group();
  layout.replica_count = grid.data_parallel_size();
  layout.replica = grid.replica();
  layout.algorithm = algorithm;
  return layout;
}

void split_sequences(nn::Sequential& model, const ContextParallelLayout& layout) {
  cp::parallelize_context(model, layout.context_parallel, cp::RingAttentionOptions().split(kSplit),
                          cp::parse_algorithm(layout.algorithm));
}

std::unique_ptr<Strategy> context_parallel_strategy(const Config& config,
                                                    std::unique_ptr<Strategy> inner,
                                                    std::shared_ptr<nn::Sequential> model,
                                                    const ContextParallelLayout& layout) {
  return std::make_unique<ContextParallel>(config, std::move(inner), std::move(model), layout);
}

}  // namespace train
}  // namespace tessera
