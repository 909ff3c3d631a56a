#include "tools/train/data_parallel.h"

#include <optional>

#include "dist/compression/make_hook.h"
#include "dist/ddp/ddp.h"
#include "dist/grad_norm.h"
#include "dist/module_sync.h"
#include "dist/tensor_parallel/norm_counted.h"
#include "autograd/grad_mode.h"
#include "dist/state_dict_gather.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/trace_recorder.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"
#include "tools/train/autocast_forward.h"
#include "tools/train/collectives.h"
#include "tools/train/compression_report.h"
#include "tools/train/offload.h"

namespace tessera {
namespace train {

namespace {

// One process, DDP or ZeRO-1/2 (data_parallel.h); make_data_parallel chooses which by wrapping
// the model or choosing the optimizer.
class DataParallel : public Strategy {
 public:
  DataParallel(std::shared_ptr<nn::Sequential> model, std::shared_ptr<dist::ProcessGroup> world,
               const dist::Topology* topology, Criterion criterion, MixedPrecision& precision)
      : model_(std::move(model)),
        world_(std::move(world)),
        data_parallel_(topology ? topology->data_parallel_group() : world_),
        tensor_parallel_(topology ? topology->tensor_parallel_group() : nullptr),
        criterion_(std::move(criterion)),
        precision_(precision) {}

  // --compression: a communication hook compresses every bucket (dist/compression/).
  void wrap_in_ddp(const Config& c) {
    ddp_ = std::make_unique<dist::DistributedDataParallel>(
        model_, data_parallel_, dist::DDPOptions().bucket_cap_mb(c.bucket_cap_mb).first_bucket_mb(c.first_bucket_mb));
    const std::optional<bool> error_feedback =
        c.error_feedback == "default" ? std::nullopt : std::optional<bool>(c.error_feedback == "true");
    dist::compression::CompressionSpec spec = dist::compression::parse_compression(c.compression);
    spec.powersgd_start_iter = c.powersgd_start_iter;
    compression_ = dist::compression::make_compression_hook(spec, error_feedback, c.seed);
    if (compression_) ddp_->register_comm_hook(compression_);
    if (c.collectives == "hierarchical") {
      hierarchical_.emplace(c);
      ddp_->register_comm_hook(hierarchical_->hook());
    }
  }
  const std::shared_ptr<dist::ProcessGroup>& data_parallel_group() const { return data_parallel_; }
  // ZeRO's group: the data-parallel one, or with --collectives=hierarchical the world with its
  // reduce-scatters and all-gathers over the nodes.
  std::shared_ptr<dist::ProcessGroup> zero_group(const Config& c) {
    if (c.collectives != "hierarchical") return data_parallel_;
    hierarchical_.emplace(c);
    return hierarchical_->group(world_);
  }
  void set_optimizer(std::unique_ptr<optim::Optimizer> opt) { opt_ = std::move(opt); }

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    // --trace: DDP records its forward and each layer's backward; otherwise the whole of each.
    const bool traced = dist::trace::recording() && !ddp_;
    const double forward_start = dist::steady_seconds();
    const Variable loss = autocast_loss(
        precision_, [this](const Variable& x) { return ddp_ ? ddp_->forward(x) : model_->forward(x); },
        criterion_, inputs, targets);
    opt_->zero_grad();
    // The buckets' traffic is what backward sends (DDP waits for it at its end).
    const int64_t before = data_parallel_ ? data_parallel_->ledger().total_bytes() : 0;
    const double backward_start = dist::steady_seconds();
    precision_.scaler().scale(loss).backward();
    if (traced) {
      auto& recorder = dist::trace::TraceRecorder::global();
      recorder.span("forward", "forward", forward_start, backward_start);
      recorder.span("backward", "backward", backward_start, dist::steady_seconds());
    }
    if (data_parallel_) bucket_bytes_ += data_parallel_->ledger().total_bytes() - before;
    ++steps_;
    return loss.item();
  }
  Tensor predict(const Tensor& inputs) override {
    return autocast_predict(precision_, [this](const Variable& x) { return model_->forward(x); },
                            inputs);
  }
  // --compression: the hook's state differs per rank (error feedback's residuals are each
  // rank's own): every world rank's, gathered, as "comm_hook.rank.R.KEY" with R the world rank.
  // Under --tensor-parallel the ranks of a replica compress their own slices, whose buckets
  // may differ in shape (uneven slices, a whole bias on one side), so the gather is of
  // variable size (dist/state_dict_gather.h), over the world rather than the data-parallel
  // group. There the compression also makes the parameters every tensor-parallel rank holds
  // whole (a row-parallel layer's bias) differ between those ranks: each rank's top-k picks
  // from its own bucket, the bias beside its slices. The checkpoint's model and optimizer hold
  // tensor-parallel rank 0's; every rank's own are kept too, as
  // "tensor_parallel.rank.R.model.NAME" and "tensor_parallel.rank.R.optimizer.state.I.KEY".
  StateDict extra_state() override {
    StateDict out;
    if (!compression_) return out;
    const std::vector<StateDict> all = dist::all_gather_state_dicts(own_state(), *world_);
    for (size_t r = 0; r < all.size(); ++r) {
      for (const char* part : {"comm_hook.", "tensor_parallel."}) {
        for (const auto& [key, t] : all[r].with_prefix_removed(part)) {
          out.set(part + std::string("rank.") + std::to_string(r) + "." + key, t);
        }
      }
    }
    return out;
  }
  void load_extra_state(const Checkpoint& checkpoint, bool lead) override {
    if (!compression_) return;
    auto of_rank = [&](const char* part, int r) {
      return checkpoint.extra.with_prefix_removed(part + std::string("rank.") + std::to_string(r) + ".");
    };
    int saved = 0;
    while (!of_rank("comm_hook.", saved).empty()) ++saved;
    if (saved != world_->size()) {
      // Residuals belong to ranks: from another world size, or from a run without this hook,
      // compression starts fresh on every rank (the model and optimizer still resume exactly).
      if (lead) {
        std::printf("%s: the %s hook's state starts fresh (the checkpoint holds it for %d "
                    "ranks, this run has %d)\n", checkpoint.path.c_str(),
                    compression_->name().c_str(), saved, world_->size());
      }
      return;
    }
    compression_->load_state_dict(of_rank("comm_hook.", world_->rank()));
    const StateDict own = of_rank("tensor_parallel.", world_->rank());
    if (!tensor_parallel_ || own.empty()) return;
    NoGradGuard no_grad;
    for (const auto& [name, p] : model_->named_parameters()) {
      if (const Tensor* t = own.find("model." + name)) Tensor(p.data()).copy_(*t);
    }
    StateDict state = opt_->state_dict();
    for (const auto& [key, t] : own.with_prefix_removed("optimizer.")) state.set(key, t);
    opt_->load_state_dict(state);
  }
  void report(json::Object& summary, bool lead) override {
    if (hierarchical_ && lead) hierarchical_->report(summary, steps_);
    if (lead) report_offload(summary, *opt_);
    if (!compression_ || !lead || !ddp_) return;
    summary.add_raw("compression", compression_json(*compression_, ddp_->grad_buckets(),
                                                    data_parallel_->size(), steps_, bucket_bytes_));
  }
  optim::Optimizer& optimizer() override { return *opt_; }
  // ZeRO-1/2 clip their shard (stage 1 reduce-scatters first); with tensor parallelism each rank
  // counts its slices and rank 0 of the group the parameters every rank holds whole; one
  // process and DDP (whose gradients are averaged already) the whole model.
  double clip_grad_norm(double max_norm) override {
    auto* zero = dynamic_cast<dist::ZeroRedundancyOptimizer*>(opt_.get());
    if (!tensor_parallel_) {
      return zero ? zero->clip_grad_norm(max_norm) : Strategy::clip_grad_norm(max_norm);
    }
    const std::vector<Variable> held = model_->parameters();
    const std::vector<Variable> counted = dist::tensor_parallel::norm_counted_parameters(
        held, *model_, tensor_parallel_->rank());
    if (zero) return zero->clip_grad_norm(max_norm, counted, {tensor_parallel_});
    return dist::clip_grad_norm(held, counted, max_norm, {tensor_parallel_});
  }
  int replicas() const override { return data_parallel_ ? data_parallel_->size() : 1; }
  int replica() const override { return data_parallel_ ? data_parallel_->rank() : 0; }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override { return data_parallel_; }
  void sync_buffers() override {
    if (data_parallel_) dist::sync_buffers(*model_, *data_parallel_);
  }
  std::vector<Variable> model_state_parameters() const override { return model_->parameters(); }
  // With tensor parallelism the optimizer's state of a split layer is this rank's slice: a
  // checkpoint holds it gathered, as the layer's weight (dist/tensor_parallel/optimizer_state.h).
  StateDict optimizer_state() override {
    const StateDict local = opt_->state_dict();
    return tensor_parallel_ ? dist::tensor_parallel::gather_optimizer_state(local, *model_, state_order())
                            : local;
  }
  void save_sharded(const std::string& dir, const TrainingProgress& progress,
                    const Metadata& extra) override {
    // check_combinations (flag_rules.cc) lets --checkpoint-format=sharded through only here.
    const auto* zero = dynamic_cast<const dist::ZeroRedundancyOptimizer*>(opt_.get());
    TS_INTERNAL_ASSERT(zero != nullptr && !tensor_parallel_);
    dist::zero::save_sharded_checkpoint(dir, *model_, *zero, progress, extra);
  }
  TrainingProgress load_sharded(const std::string& dir, Metadata* extra) override {
    TS_CHECK(!tensor_parallel_, "train: --resume=", dir, " is a sharded (ZeRO) checkpoint; a "
             "--tensor-parallel run resumes from full checkpoints only");
    // ZeRO reads its shard of the state collectively; one process and DDP read whole tensors.
    return dist::zero::load_sharded_checkpoint(dir, *model_, opt_.get(), extra);
  }
  void load_optimizer_state(const Checkpoint& checkpoint) override {
    if (!tensor_parallel_) return Strategy::load_optimizer_state(checkpoint);
    Checkpoint sliced = checkpoint;
    sliced.optimizer =
        dist::tensor_parallel::slice_optimizer_state(checkpoint.optimizer, *model_, state_order());
    tessera::load_optimizer_state(sliced, *opt_);
  }
  std::vector<NamedGroup> groups() const override {
    if (!world_) return {};
    if (hierarchical_) {
      return {{"world", world_.get()},
              {"intra-node", hierarchical_->intra_node()},
              {"inter-node", hierarchical_->inter_node()}};
    }
    if (!tensor_parallel_) return {{"world", world_.get()}};
    return {{"world", world_.get()},
            {"data-parallel", data_parallel_.get()},
            {"tensor-parallel", tensor_parallel_.get()}};
  }

 private:
  // This rank's compression state ("comm_hook.KEY") and, under --tensor-parallel, its replicated
  // parameters and their optimizer state ("tensor_parallel.model.NAME", ".optimizer.KEY").
  StateDict own_state() {
    StateDict mine;
    for (const auto& [key, t] : compression_->state_dict()) mine.set("comm_hook." + key, t);
    if (!tensor_parallel_) return mine;
    const std::vector<bool> replicated = dist::tensor_parallel::replicated_parameters(*model_);
    const auto named = model_->named_parameters();
    for (size_t i = 0; i < named.size(); ++i) {
      if (replicated[i]) mine.set("tensor_parallel.model." + named[i].first, named[i].second.data().clone());
    }
    // Their optimizer state, by the optimizer's own numbering.
    const std::vector<bool> replicated_state =
        dist::tensor_parallel::replicated_parameters(*model_, state_order());
    const StateDict state = opt_->state_dict();
    for (size_t i = 0; i < replicated_state.size(); ++i) {
      if (!replicated_state[i]) continue;
      for (const auto& [key, t] : state.with_prefix_removed(optim::state_key_prefix(i))) {
        mine.set("tensor_parallel.optimizer." + optim::state_key(i, key), t);
      }
    }
    return mine;
  }

  // The parameters as the optimizer's state numbers them ("state.I.KEY"): its groups in order
  // (the GPT's decay group first), ZeRO-1's consolidated state as well.
  std::vector<Variable> state_order() const { return opt_->parameters(); }

  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> world_, data_parallel_, tensor_parallel_;
  Criterion criterion_;
  MixedPrecision& precision_;
  std::unique_ptr<dist::DistributedDataParallel> ddp_;
  std::shared_ptr<dist::CommunicationHook> compression_;  // --compression, or null
  std::optional<HierarchicalCollectives> hierarchical_;   // --collectives=hierarchical
  int64_t bucket_bytes_ = 0, steps_ = 0;
  std::unique_ptr<optim::Optimizer> opt_;
};

}  // namespace

std::unique_ptr<Strategy> make_data_parallel(const Config& config,
                                             std::shared_ptr<nn::Sequential> model,
                                             std::shared_ptr<dist::ProcessGroup> world,
                                             const dist::Topology* topology, Criterion criterion,
                                             MixedPrecision& precision) {
  auto s = std::make_unique<DataParallel>(model, world, topology, std::move(criterion), precision);
  if (config.strategy == "ddp") {
    s->wrap_in_ddp(config);
    s->set_optimizer(make_optimizer(config, model->parameters(), *model));
  } else if (config.strategy == "zero1" || config.strategy == "zero2") {
    const int stage = config.strategy == "zero1" ? 1 : 2;
    // The flat vector in registration order, the shard cut by the groups (a GPT's two).
    s->set_optimizer(std::make_unique<dist::ZeroRedundancyOptimizer>(
        model->parameters(), make_param_groups(config, model->parameters(), *model),
        s->zero_group(config),
        [config](std::vector<optim::ParamGroup> pieces) {
          return make_optimizer(config, std::move(pieces));
        },
        dist::ZeroOptions()
            .stage(stage)
            .bucket_cap_mb(config.bucket_cap_mb)
            .reduce_dtype(config.compression == "fp16"   ? kF16
                          : config.compression == "bf16" ? kBF16
                                                         : kF32)
            .offload(offload_of(config))));
  } else {
    s->set_optimizer(make_optimizer(config, model->parameters(), *model));
  }
  return s;
}

}  // namespace train
}  // namespace tessera
