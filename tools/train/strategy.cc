#include "tools/train/strategy.h"

#include "tools/train/decentralized.h"
#include "tools/train/asynchronous.h"
#include "tools/train/collectives.h"
#include "tools/train/local_sgd.h"

#include <fstream>
#include <optional>

#include "autograd/grad_mode.h"
#include "dist/compression/compression_hook.h"
#include "dist/compression/make_hook.h"
#include "dist/compression/powersgd.h"
#include "dist/ddp.h"
#include "dist/module_sync.h"
#include "dist/tensor_parallel/optimizer_state.h"
#include "dist/topology.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/sharded_checkpoint.h"
#include "dist/zero/zero_optimizer.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "pipeline/microbatch.h"
#include "pipeline/optimizer_state.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "tensor/ops.h"

namespace tessera {
namespace train {

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
      params, optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
}

namespace {

// One process, DDP or ZeRO: every rank holds the whole model and reads its own shard of the
// data. DDP wraps the model (it averages gradients during backward); ZeRO is the optimizer
// (it reduces them itself), so the model runs as it is. With tensor parallelism the model's
// split layers hold this rank's slices, the ranks of a tensor-parallel group read the same
// shard, and DDP or ZeRO-1 runs over the data-parallel group (one rank of each replica).
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
        model_, data_parallel_, dist::DDPOptions().bucket_cap_mb(c.bucket_cap_mb));
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
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      precision_.autocast(autocast);
      const Variable x(inputs);
      loss = criterion_(ddp_ ? ddp_->forward(x) : model_->forward(x), targets);
    }
    opt_->zero_grad();
    // The buckets' traffic is what backward sends (DDP waits for it at its end).
    const int64_t before = data_parallel_ ? data_parallel_->ledger().total_bytes() : 0;
    precision_.scaler().scale(loss).backward();
    if (data_parallel_) bucket_bytes_ += data_parallel_->ledger().total_bytes() - before;
    ++steps_;
    return loss.item();
  }
  Tensor predict(const Tensor& inputs) override {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;
    precision_.autocast(autocast);
    return model_->forward(Variable(inputs)).data();
  }
  // --compression: the hook's state differs per rank (error feedback's residuals are each
  // rank's own): every rank's, gathered, as "comm_hook.rank.R.KEY". Every rank's hook holds the
  // same keys and shapes (the same buckets, the same steps).
  StateDict extra_state() override {
    StateDict out;
    if (!compression_) return out;
    const int n = data_parallel_->size();
    for (const auto& [key, t] : compression_->state_dict()) {
      const Tensor mine = t.contiguous().reshape({-1});
      Tensor all = empty({mine.numel() * n}, TensorOptions(mine.dtype()));
      data_parallel_->all_gather(mine, all)->wait();
      for (int r = 0; r < n; ++r) {
        out.set("comm_hook.rank." + std::to_string(r) + "." + key,
                all.narrow(0, r * mine.numel(), mine.numel()).view(t.shape()).clone());
      }
    }
    return out;
  }
  void load_extra_state(const Checkpoint& checkpoint, bool lead) override {
    if (!compression_) return;
    auto of_rank = [&](int r) {
      return checkpoint.extra.with_prefix_removed("comm_hook.rank." + std::to_string(r) + ".");
    };
    int saved = 0;
    while (!of_rank(saved).empty()) ++saved;
    if (saved != data_parallel_->size()) {
      // Residuals belong to ranks: from another world size, or from a run without this hook,
      // compression starts fresh on every rank (the model and optimizer still resume exactly).
      if (lead) {
        std::printf("%s: the %s hook's state starts fresh (the checkpoint holds it for %d "
                    "ranks, this run has %d)\n", checkpoint.path.c_str(),
                    compression_->name().c_str(), saved, data_parallel_->size());
      }
      return;
    }
    compression_->load_state_dict(of_rank(data_parallel_->rank()));
  }
  // --compression: bytes per step measured on the ledger beside the uncompressed all-reduce's
  // and the compressor's formula, bucket by bucket.
  void report(JsonObject& summary, bool lead) override {
    if (hierarchical_ && lead) hierarchical_->report(summary, steps_);
    if (!compression_ || !lead || !ddp_) return;
    const int n = data_parallel_->size();
    const auto* hook = dynamic_cast<const dist::compression::CompressionHook*>(compression_.get());
    const auto* powersgd = dynamic_cast<const dist::compression::PowerSGDHook*>(compression_.get());
    double uncompressed = 0, theory = 0;
    for (const dist::GradBucket& b : ddp_->grad_buckets()) {
      const double all = 2.0 * (n - 1) / n * 4.0 * static_cast<double>(b.buffer.numel());
      uncompressed += all;
      if (hook) theory += dist::compression::bytes_sent(hook->compressor(), b.buffer.numel(), n);
      if (powersgd) {
        // Plain all-reduces for the first start_powerSGD_iter steps, then U + P + Q elements.
        const double compressed = 2.0 * (n - 1) / n * 4.0 *
            static_cast<double>(dist::compression::plan_powersgd(b, powersgd->options()).wire_numel());
        const double plain = static_cast<double>(
            std::min<int64_t>(steps_, powersgd->options().start_powerSGD_iter()));
        theory += steps_ > 0 ? (plain * all + (steps_ - plain) * compressed) / steps_ : compressed;
      }
    }
    const double measured = steps_ > 0 ? static_cast<double>(bucket_bytes_) / steps_ : 0.0;
    JsonObject c;
    c.add("name", compression_->name())
        .add("bytes_per_step", measured)
        .add("bytes_per_step_uncompressed", uncompressed)
        .add("ratio", uncompressed > 0 ? measured / uncompressed : 0.0)
        .add("ratio_theory", uncompressed > 0 ? theory / uncompressed : 0.0);
    summary.add_raw("compression", c.str());
  }
  optim::Optimizer& optimizer() override { return *opt_; }
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
    return tensor_parallel_ ? dist::tensor_parallel::gather_optimizer_state(local, *model_) : local;
  }
  void save_sharded(const std::string& dir, const TrainingProgress& progress,
                    const Metadata& extra) override {
    const auto* zero = dynamic_cast<const dist::ZeroRedundancyOptimizer*>(opt_.get());
    TS_CHECK(zero != nullptr && !tensor_parallel_, "train: a sharded checkpoint needs ZeRO's "
             "optimizer (--strategy=zero1 or zero2) without --tensor-parallel");
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
    sliced.optimizer = dist::tensor_parallel::slice_optimizer_state(checkpoint.optimizer, *model_);
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
        dp_strategy_(c.dp_strategy),
        trace_file_(c.trace) {
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
    const int zero_stage = topology_.data_parallel_size() == 1 ? 0
                           : c.dp_strategy == "zero1"          ? 1
                           : c.dp_strategy == "zero2"          ? 2
                                                               : 0;
    if (zero_stage == 0) options.data_parallel_group(topology_.data_parallel_group());
    if (c.balance == "time") {
      // Layer times do not depend on the pixel values: a micro-batch of zeros of the data's shape.
      const int64_t rows = (c.batch_size + c.micro_batches - 1) / c.micro_batches;
      options.sample(zeros({rows, 1, 28, 28}, TensorOptions(kF32).device(device)));
    }
    // The micro-batch loss: scaled for fp16 inside the pipeline, where backward starts.
    MixedPrecision* amp = &precision_;
    auto loss = [criterion = std::move(criterion), amp](const Variable& out, const Tensor& y) {
      return amp->scaler().scale(criterion(out, y));
    };
    try {
      pipe_ = std::make_unique<pipeline::Pipe>(model_, topology_.pipeline_group(), loss, options);
    } catch (const std::exception& e) {
      // Pipe checks its options identically on every rank before any message (pipe.h).
      throw FlagError(pipeline_flags(c, world->size() / c.tensor_parallel) + ": " + e.what());
    }
    if (zero_stage > 0) {
      opt_ = std::make_unique<dist::ZeroRedundancyOptimizer>(
          pipe_->parameters(), topology_.data_parallel_group(),
          [c](std::vector<Variable> shard) { return make_optimizer(c, std::move(shard)); },
          dist::ZeroOptions().stage(zero_stage).bucket_cap_mb(c.bucket_cap_mb));
    } else {
      opt_ = make_optimizer(c, pipe_->parameters());
    }
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
    const pipeline::StageStats& s = pipe_->stats();
    step_seconds_ += s.step_seconds;
    busy_seconds_ += s.busy_seconds;
    peak_activation_bytes_ = std::max(peak_activation_bytes_, s.peak_activation_bytes);
    peak_held_bytes_ = std::max(peak_held_bytes_, s.peak_held_bytes);
    last_bubble_report_ = pipe_->bubble_report();  // before evaluation replaces the stats
    if (!trace_file_.empty()) last_train_trace_ = pipe_->trace();
  }
  Tensor predict(const Tensor& inputs) override {
    std::optional<AutocastGuard> autocast;
    precision_.autocast(autocast);
    return pipe_->forward(inputs);
  }
  optim::Optimizer& optimizer() override { return *opt_; }
  int replicas() const override { return topology_.data_parallel_size(); }
  int replica() const override { return topology_.replica(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override {
    return topology_.data_parallel_group();
  }
  void sync_buffers() override {
    // The replicas of a stage agree on its BatchNorm statistics; other stages' parts of the
    // model are not used here (gather_model brings them).
    if (topology_.data_parallel_size() > 1) {
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
  StateDict optimizer_state() override {
    const StateDict whole = pipeline::gather_optimizer_state(*pipe_, opt_->state_dict());
    return tensor_parallel_ ? dist::tensor_parallel::gather_optimizer_state(whole, *model_) : whole;
  }
  void load_optimizer_state(const Checkpoint& checkpoint) override {
    Checkpoint stage = checkpoint;
    const StateDict mine =
        tensor_parallel_ ? dist::tensor_parallel::slice_optimizer_state(checkpoint.optimizer, *model_)
                         : checkpoint.optimizer;
    stage.optimizer = pipeline::slice_optimizer_state(*pipe_, mine);
    tessera::load_optimizer_state(stage, *opt_);
  }
  std::vector<Variable> model_state_parameters() const override { return pipe_->parameters(); }

  void report(JsonObject& summary, bool lead) override {
    // Each rank's idle fraction over all training steps, its peak activation bytes and the most
    // it held between two actions.
    const double idle = step_seconds_ > 0 ? 1.0 - busy_seconds_ / step_seconds_ : 0.0;
    dist::ProcessGroup& world = *topology_.world();
    const int n = world.size();
    Tensor mine = from_vector<double>({idle, static_cast<double>(peak_activation_bytes_),
                                       static_cast<double>(peak_held_bytes_)}, {3});
    Tensor all = empty({3 * n}, kF64);
    world.all_gather(mine, all)->wait();
    // --trace: the last training step of every stage of this rank's pipeline (collective over
    // the pipeline group), one track per stage; rank 0 writes its pipeline's.
    std::string trace;
    if (!trace_file_.empty()) {
      trace = pipeline::chrome_trace_json(
          pipeline::gather_trace(last_train_trace_, *topology_.pipeline_group()),
          pipe_->chunks().size() > 1);
    }
    if (!lead) return;
    if (!trace_file_.empty()) {
      std::ofstream out(trace_file_);
      out << trace;
      out.flush();
      TS_CHECK(out.good(), "train: cannot write the --trace file '", trace_file_, "'");
      std::printf("pipeline trace of the last training step: %s (chrome://tracing, Perfetto)\n",
                  trace_file_.c_str());
    }
    const std::vector<double> v = all.to_vector<double>();
    std::string idles = "[", peaks = "[", held = "[";
    double idle_sum = 0;
    for (int r = 0; r < n; ++r) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.4f", v[3 * r]);
      idles += (r ? ", " : "") + std::string(buf);
      peaks += (r ? ", " : "") + std::to_string(static_cast<int64_t>(v[3 * r + 1]));
      held += (r ? ", " : "") + std::to_string(static_cast<int64_t>(v[3 * r + 2]));
      idle_sum += v[3 * r];
    }
    const int k = pipe_->stages(), m = microbatches_;
    const int chunks = static_cast<int>(pipe_->chunks().size());
    std::string balance = "[";
    for (size_t i = 0; i < pipe_->balance().size(); ++i) {
      balance += (i ? ", " : "") + std::to_string(pipe_->balance()[i]);
    }
    std::printf("pipeline (rank 0, last step): %s\n", last_bubble_report_.c_str());
    summary.add_raw("pipeline", JsonObject()
                                    .add("stages", k)
                                    .add("micro_batches", m)
                                    .add("micro_batches_requested", requested_microbatches_)
                                    .add("schedule", pipeline::schedule_name(pipe_->schedule()))
                                    .add("chunks", chunks)
                                    .add("dp_strategy", dp_strategy_)
                                    .add_raw("balance", balance + "]")
                                    .add("bubble_formula", "(K-1)/(vM+K-1)")
                                    .add("bubble_theory", pipeline::bubble_fraction(k, m, chunks))
                                    .add("bubble_measured", idle_sum / n)
                                    .add_raw("idle_fraction_per_rank", idles + "]")
                                    .add_raw("peak_activation_bytes", peaks + "]")
                                    .add_raw("peak_held_bytes", held + "]")
                                    .str());
  }

 private:
  std::shared_ptr<nn::Sequential> model_;
  dist::Topology topology_;
  bool tensor_parallel_;
  MixedPrecision& precision_;
  std::unique_ptr<pipeline::Pipe> pipe_;
  std::unique_ptr<optim::Optimizer> opt_;
  double step_seconds_ = 0, busy_seconds_ = 0;
  int64_t peak_activation_bytes_ = 0, peak_held_bytes_ = 0;
  std::string last_bubble_report_;
  int microbatches_;            // M as run: min(--micro-batches, the batch's rows)
  int requested_microbatches_;  // --micro-batches
  std::string dp_strategy_;  // --dp-strategy
  std::string trace_file_;                 // --trace
  std::vector<pipeline::Span> last_train_trace_;
};

// Under --amp, ZeRO-3 gathers its units in the autocast dtype (so autocast caches no casts of
// them) and averages gradients in f32, as DDP's f32 gradients are.
dist::MixedPrecision unit_precision(const MixedPrecision& precision) {
  if (!precision.autocast_enabled()) return dist::MixedPrecision();
  return dist::MixedPrecision().param_dtype(precision.autocast_dtype()).reduce_dtype(kF32);
}

// ZeRO-3: the model's parameters live as flat shards (dist::FullyShardedDataParallel gathers
// each unit around its forward and backward); the optimizer is an ordinary one over this
// rank's shards. Checkpoints hold the whole model (gathered); the optimizer's state stays
// per shard, so a resume starts it fresh.
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
        fsdp_(std::move(model),
              hierarchical_ ? std::shared_ptr<dist::ProcessGroup>(hierarchical_->group(world))
                            : std::move(world),
              dist::FullyShardedOptions()
                  .min_num_params(c.zero3_min_params)
                  .wrap_layers(c.zero3_wrap_layers)
                  .prefetch_limit(c.zero3_prefetch ? 1 : 0)
                  .mixed_precision(unit_precision(precision))),
        opt_(make_optimizer(c, fsdp_.shard_parameters())),
        criterion_(std::move(criterion)),
        precision_(precision) {}

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    Variable loss;
    {
      std::optional<AutocastGuard> autocast;
      precision_.autocast(autocast);
      loss = criterion_(fsdp_.forward(Variable(inputs)), targets);
    }
    opt_->zero_grad();
    precision_.scaler().scale(loss).backward();
    ++steps_;
    return loss.item();
  }
  Tensor predict(const Tensor& inputs) override {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;
    precision_.autocast(autocast);
    return fsdp_.forward(Variable(inputs)).data();
  }
  void report(JsonObject& summary, bool lead) override {
    if (hierarchical_ && lead) hierarchical_->report(summary, steps_);
  }
  optim::Optimizer& optimizer() override { return *opt_; }
  int replicas() const override { return world_->size(); }
  int replica() const override { return world_->rank(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override { return world_; }
  void sync_buffers() override { dist::sync_buffers(*model_, *world_); }
  StateDict model_state(const nn::Module&) override { return fsdp_.state_dict(); }
  void load_model_state(nn::Module&, const Checkpoint& checkpoint) override {
    fsdp_.load_state_dict(checkpoint.model);
  }
  bool checkpoints_optimizer() const override { return false; }
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
  dist::FullyShardedDataParallel fsdp_;
  std::unique_ptr<optim::Optimizer> opt_;
  Criterion criterion_;
  MixedPrecision& precision_;
  int64_t steps_ = 0;
};

}  // namespace

void Strategy::save_sharded(const std::string& dir, const TrainingProgress&, const Metadata&) {
  TS_FAIL("train: this strategy does not shard its checkpoints (", dir, "): --checkpoint-format="
          "sharded needs --strategy=zero1, zero2 or zero3");
}

TrainingProgress Strategy::load_sharded(const std::string& dir, Metadata*) {
  TS_FAIL("train: --resume=", dir, " is a sharded (ZeRO) checkpoint, which one process, DDP and "
          "ZeRO runs read; a pipeline resumes from full checkpoints (--checkpoint-format=full)");
}

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world,
                                        const dist::Topology* topology, Criterion criterion,
                                        MixedPrecision& precision, Device device) {
  if (config.strategy == "pipeline") {
    return std::make_unique<Pipeline>(config, model, world, topology, std::move(criterion),
                                      precision, device);
  }
  if (config.strategy == "local-sgd") {
    return make_local_sgd(config, model, world, std::move(criterion), precision);
  }
  if (config.strategy == "async") {
    return make_asynchronous(config, model, world, std::move(criterion), precision);
  }
  if (config.strategy == "gossip") {
    return make_decentralized(config, model, world, std::move(criterion), precision);
  }
  if (config.strategy == "zero3") {
    return std::make_unique<FullySharded>(config, model, world, std::move(criterion), precision);
  }
  auto s = std::make_unique<DataParallel>(model, world, topology, std::move(criterion), precision);
  if (config.strategy == "ddp") {
    s->wrap_in_ddp(config);
    s->set_optimizer(make_optimizer(config, model->parameters()));
  } else if (config.strategy == "zero1" || config.strategy == "zero2") {
    const int stage = config.strategy == "zero1" ? 1 : 2;
    s->set_optimizer(std::make_unique<dist::ZeroRedundancyOptimizer>(
        model->parameters(), s->zero_group(config),
        [config](std::vector<Variable> shard) { return make_optimizer(config, std::move(shard)); },
        dist::ZeroOptions()
            .stage(stage)
            .bucket_cap_mb(config.bucket_cap_mb)
            .reduce_dtype(config.compression == "fp16"   ? kF16
                          : config.compression == "bf16" ? kBF16
                                                         : kF32)));
  } else {
    s->set_optimizer(make_optimizer(config, model->parameters()));
  }
  return s;
}

}  // namespace train
}  // namespace tessera
