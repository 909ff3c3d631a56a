#include "tools/train/pipelined.h"

#include <optional>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "data/mnist.h"
#include "dist/grad_norm.h"
#include "dist/module_sync.h"
#include "dist/tensor_parallel/norm_counted.h"
#include "dist/trace_recorder.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/zero/zero_optimizer.h"
#include "pipeline/microbatch.h"
#include "pipeline/optimizer_state.h"
#include "pipeline/pipe.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "tensor/ops.h"
#include "tools/train/pipelined_report.h"

namespace tessera {
namespace train {

namespace {

// A pipeline of K stages; the world's N ranks are K stages x N/K data-parallel replicas
// (dist::Topology). Every rank of a pipeline passes the same batch to Pipe::train_step, which
// runs the schedule over its micro-batches and leaves this stage's gradients (averaged over
// the stage's data-parallel group); each rank's optimizer steps its own stage.
class Pipeline : public Strategy {
 public:
  // `topology`: with --tensor-parallel, the P x T x D layout whose tensor-parallel group the
  // model's layers were split over; otherwise null (K stages x N/K replicas).
  Pipeline(const Config& c, std::shared_ptr<nn::Sequential> model,
           std::shared_ptr<dist::ProcessGroup> world, const dist::Topology* topology,
           Criterion criterion, MixedPrecision& precision, Device device)
      : model_(std::move(model)),
        topology_(topology != nullptr ? *topology
                                      : dist::Topology(world, pipeline_stages(c, world->size()))),
        tensor_parallel_(topology != nullptr && topology->tensor_parallel_size() > 1),
        precision_(precision),
        microbatches_(static_cast<int>(pipeline::microbatch_sizes(c.batch_size, c.micro_batches).size())),
        requested_microbatches_(c.micro_batches),
        dp_strategy_(c.dp_strategy) {
    // A batch of B rows makes min(M, B) micro-batches (pipeline/microbatch.h): one truth for
    // the text, the JSON and the bubble's formula, said once here.
    if (microbatches_ < c.micro_batches && world->rank() == 0) {
      std::printf("pipeline: --micro-batches=%d, but a batch of %lld rows per replica makes %d "
                  "micro-batches of one row: the pipeline runs M = %d\n",
                  c.micro_batches, static_cast<long long>(c.batch_size), microbatches_,
                  microbatches_);
    }
    pipeline::PipeOptions options = pipeline::PipeOptions()
                                        .microbatches(c.micro_batches)
                                        .schedule(c.pipeline_schedule)
                                        .chunks_per_rank(c.chunks)
                                        .balance(c.balance)
                                        .checkpoint(c.checkpoint_activations)
                                        .deferred_batch_norm(c.deferred_batch_norm);
    // --dp-strategy=ddp: Pipe averages each stage's gradients over its replicas after the last
    // backward; zero1: a ZeRO-1 optimizer over the stage's parameters does (reduce-scatter) and
    // shards the stage's optimizer state over the replicas; zero2: the gradients too, reduced
    // during each micro-batch's backward.
    // The stage's data-parallel group: its replicas, and under context parallelism each
    // replica's C ranks too (dist::Topology), all holding the same stage.
    const int zero_stage = topology_.data_parallel_group()->size() == 1 ? 0
                           : c.dp_strategy == "zero1"          ? 1
                           : c.dp_strategy == "zero2"          ? 2
                                                               : 0;
    if (zero_stage == 0) options.data_parallel_group(topology_.data_parallel_group());
    if (c.balance == "time") {
      // Layer times do not depend on the values: a micro-batch of zeros of the data's shape
      // (token ids for a GPT, images otherwise).
      const int64_t rows = (c.batch_size + c.micro_batches - 1) / c.micro_batches;
      const data::ImageShape& s = data::kMnistImage;
      options.sample(language_model(c)
                         ? zeros({rows, c.seq_len / c.context_parallel},  // the rank's chunks
                                 TensorOptions(kI64).device(device))
                         : zeros({rows, s.channels, s.height, s.width}, TensorOptions(kF32).device(device)));
    }
    // The GPT's lm_head ties the token embedding's weight (nn::Module::register_tied_parameter),
    // which the Pipe finds in the module tree: the stages holding either keep a copy, their
    // gradients summed each batch (pipeline/tied_parameters.h).
    // The micro-batch loss: scaled for fp16 inside the pipeline, where backward starts.
    MixedPrecision* amp = &precision_;
    auto loss = [criterion = std::move(criterion), amp](const Variable& out, const Tensor& y) {
      return amp->scaler().scale(criterion(out, y));
    };
    try {
      pipe_ = std::make_unique<pipeline::Pipe>(model_, topology_.pipeline_group(), loss, options);
    } catch (const std::exception& e) {
      // Pipe checks its options identically on every rank before any message (pipe.h).
      throw FlagError(pipeline_flags(c, world->size() / (c.tensor_parallel * c.context_parallel)) +
                      ": " + e.what());
    }
    if (zero_stage > 0) {
      // The stage's parameter groups (a GPT's decay and no-decay), its shard cut by them; its
      // consolidated state is numbered as a plain optimizer over these groups numbers it.
      std::vector<optim::ParamGroup> groups = make_param_groups(c, pipe_->parameters(), *model_);
      for (const optim::ParamGroup& g : groups) state_groups_.push_back(g.params);
      auto zero = std::make_unique<dist::ZeroRedundancyOptimizer>(
          pipe_->parameters(), std::move(groups),
          topology_.data_parallel_group(),
          [c](std::vector<optim::ParamGroup> pieces) { return make_optimizer(c, std::move(pieces)); },
          dist::ZeroOptions().stage(zero_stage).bucket_cap_mb(c.bucket_cap_mb));
      pipe_->use_zero_optimizer(*zero);  // the tied gradients are reduced where ZeRO keeps them
      opt_ = std::move(zero);
    } else {
      opt_ = make_optimizer(c, pipe_->parameters(), *model_);
      state_groups_ = pipeline::parameter_groups(*opt_);
    }
    // A one-process run's optimizer numbers the state a checkpoint holds (the GPT's decay
    // group first); made only for its numbering (its state is allocated at its first step).
    model_state_groups_ = pipeline::parameter_groups(*make_optimizer(c, model_->parameters(), *model_));
  }

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    opt_->zero_grad();
    double scaled_loss;
    {
      // The schedule interleaves forwards and backwards, so backward runs inside the guard
      // too; it computes on plain tensors, which autocast does not touch.
      std::optional<AutocastGuard> autocast;
      precision_.autocast(autocast);
      scaled_loss = pipe_->train_step(inputs, targets);
    }
    return scaled_loss / precision_.scaler().get_scale();
  }
  void after_step() override {
    accumulate(run_stats_, pipe_->stats());
    last_bubble_report_ = pipe_->bubble_report();  // before evaluation replaces the stats
    // --trace: this stage's actions of the step (the recorder gathers every rank's at the end).
    if (dist::trace::recording()) pipeline::record_spans(pipe_->trace(), pipe_->chunks().size() > 1);
  }
  Tensor predict(const Tensor& inputs) override {
    std::optional<AutocastGuard> autocast;
    precision_.autocast(autocast);
    return pipe_->forward(inputs);
  }
  optim::Optimizer& optimizer() override { return *opt_; }
  // Each stage counts the parameters it owns (a copy of a tied parameter counts on its owner's
  // stage only; with tensor parallelism, the slices its rank counts), summed over the
  // tensor-parallel group and then the stages; ZeRO replicas over their shards. Every held
  // parameter, copies included, is scaled alike.
  double clip_grad_norm(double max_norm) override {
    std::vector<std::shared_ptr<dist::ProcessGroup>> others;
    if (tensor_parallel_) others.push_back(topology_.tensor_parallel_group());
    others.push_back(topology_.pipeline_group());
    const std::vector<Variable> held = pipe_->parameters();
    const std::vector<Variable> owned = pipe_->owned_parameters();
    const std::vector<Variable> counted =
        tensor_parallel_ ? dist::tensor_parallel::norm_counted_parameters(
                               owned, *model_, topology_.tensor_parallel_group()->rank())
                         : owned;
    if (auto* zero = dynamic_cast<dist::ZeroRedundancyOptimizer*>(opt_.get())) {
      return zero->clip_grad_norm(max_norm, counted, others);
    }
    return dist::clip_grad_norm(held, counted, max_norm, others);
  }
  int replicas() const override { return topology_.data_parallel_size(); }
  int replica() const override { return topology_.replica(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override {
    return topology_.data_parallel_group();
  }
  void sync_buffers() override {
    // The replicas of a stage agree on its BatchNorm statistics; other stages' parts of the
    // model are not used here (gather_model brings them).
    if (topology_.data_parallel_group()->size() > 1) {
      dist::sync_buffers(*model_, *topology_.data_parallel_group());
    }
  }
  StateDict model_state(const nn::Module& model) override {
    pipe_->gather_model();
    return model.state_dict();
  }
  std::vector<NamedGroup> groups() const override {
    std::vector<NamedGroup> out = {{"world", topology_.world().get()},
                                   {"pipeline", topology_.pipeline_group().get()},
                                   {"data-parallel", topology_.data_parallel_group().get()}};
    if (tensor_parallel_) out.push_back({"tensor-parallel", topology_.tensor_parallel_group().get()});
    return out;
  }
  // Collective over the pipeline group (and, for ZeRO, the data-parallel group): every
  // stage's optimizer state, renumbered into the unpipelined model's (optimizer_state.h).
  // With --tensor-parallel the renumbered state holds this rank's slices of the split layers:
  // gathered over the tensor-parallel group too, so the checkpoint is the unsplit model's.
  // Numbered as a one-process run's optimizer numbers it (model_state_groups_).
  StateDict optimizer_state() override {
    const StateDict whole = pipeline::gather_optimizer_state(*pipe_, opt_->state_dict(), state_groups_,
                                                             model_state_groups_);
    return tensor_parallel_
               ? dist::tensor_parallel::gather_optimizer_state(whole, *model_, model_state_order())
               : whole;
  }
  void load_optimizer_state(const Checkpoint& checkpoint) override {
    Checkpoint stage = checkpoint;
    const StateDict mine = tensor_parallel_ ? dist::tensor_parallel::slice_optimizer_state(
                                                  checkpoint.optimizer, *model_, model_state_order())
                                            : checkpoint.optimizer;
    stage.optimizer = pipeline::slice_optimizer_state(*pipe_, mine, state_groups_, model_state_groups_);
    tessera::load_optimizer_state(stage, *opt_);
  }
  std::vector<Variable> model_state_parameters() const override { return pipe_->parameters(); }

  // Collective: every rank's figures over the run, gathered; rank 0 prints its last step's
  // bubble and writes the JSON.
  void report(json::Object& summary, bool lead) override {
    const PerRankFigures ranks = gather_per_rank(run_stats_, *topology_.world());
    if (!lead) return;
    std::printf("pipeline (rank 0, last step): %s\n", last_bubble_report_.c_str());
    summary.add_raw("pipeline", pipeline_json(*pipe_, microbatches_, requested_microbatches_,
                                              dp_strategy_, ranks));
  }

 private:
  std::vector<Variable> model_state_order() const {
    std::vector<Variable> out;
    for (const auto& group : model_state_groups_) out.insert(out.end(), group.begin(), group.end());
    return out;
  }

  std::shared_ptr<nn::Sequential> model_;
  dist::Topology topology_;
  bool tensor_parallel_;
  MixedPrecision& precision_;
  std::unique_ptr<pipeline::Pipe> pipe_;
  std::unique_ptr<optim::Optimizer> opt_;
  pipeline::StageStats run_stats_;  // this stage's, over every training step (accumulate)
  std::string last_bubble_report_;
  int microbatches_;            // M as run: min(--micro-batches, the batch's rows)
  int requested_microbatches_;  // --micro-batches
  std::string dp_strategy_;  // --dp-strategy
  // How this stage's optimizer numbers its state (empty: ZeRO's consolidated state, one group
  // of pipe_->parameters()), and how a one-process run's optimizer numbers the whole model's.
  pipeline::ParameterGroups state_groups_, model_state_groups_;
};

}  // namespace

std::unique_ptr<Strategy> make_pipelined(const Config& config, std::shared_ptr<nn::Sequential> model,
                                         std::shared_ptr<dist::ProcessGroup> world,
                                         const dist::Topology* topology, Criterion criterion,
                                         MixedPrecision& precision, Device device) {
  return std::make_unique<Pipeline>(config, std::move(model), std::move(world), topology,
                                    std::move(criterion), precision, device);
}

}  // namespace train
}  // namespace tessera
