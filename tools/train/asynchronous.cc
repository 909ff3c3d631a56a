#include "tools/train/asynchronous.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "dist/async/async_worker.h"
#include "dist/async/parameter_server.h"
#include "dist/async/server_state.h"
#include "dist/zero/grouped_shard_optimizer.h"
#include "dist/module_sync.h"
#include "dist/reduce_scalar.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"
#include "tools/train/autocast_forward.h"

namespace tessera {
namespace train {

namespace {

// What the training loop steps on a server: nothing (the server applied every push while it
// served the iteration). It shows the server's optimizer state to the memory report, and the
// schedule's learning rate (the workers push theirs); its groups are the server optimizer's (one
// over the shard, or a GPT's decay and no-decay groups over the model's parameters), and its
// state_dict is their options (at that learning rate) with the server's shard state, "state.0.*".
class ServingOptimizer : public optim::Optimizer {
 public:
  ServingOptimizer(dist::ParameterServer& server, double lr)
      : Optimizer(server.optimizer().param_groups()[0].options->clone()), server_(server) {
    for (const optim::ParamGroup& g : server.optimizer().param_groups()) {
      Optimizer::add_param_group(optim::ParamGroup(g.params, g.options->clone()));
      param_groups().back().options->set_lr(lr);
    }
  }
  void step() override {}
  std::vector<Variable> gradient_variables() const override { return {}; }
  StateDict state_dict() const override {
    StateDict out;
    save_param_groups(out);
    for (const auto& [key, t] : server_.optimizer().state_dict()) {
      if (optim::has_state_prefix(key)) out.set(key, t);
    }
    return out;
  }
  void load_state_dict(const StateDict& state) override {
    // The server's optimizer checks everything first (its options are these but the learning
    // rate, which each push sets); then the schedule's learning rate is this one's.
    server_.optimizer().load_state_dict(state);
    load_param_groups(state);
  }
  int64_t state_bytes() const override { return server_.optimizer().state_bytes(); }

 private:
  dist::ParameterServer& server_;
};

dist::AsyncOptions async_options(const Config& c) {
  return dist::AsyncOptions()
      .servers(c.servers)
      .staleness_bound(c.staleness_bound)
      .staleness_aware_lr(c.staleness_aware_lr)
      .shared_batches(c.batch_assignment == "shared");
}

class Asynchronous : public Strategy {
 public:
  Asynchronous(const Config& c, std::shared_ptr<nn::Sequential> model,
               std::shared_ptr<dist::ProcessGroup> world, Criterion criterion,
               MixedPrecision& precision)
      : config_(c), model_(std::move(model)), world_(std::move(world)),
        criterion_(std::move(criterion)), precision_(precision) {
    const dist::AsyncOptions options = async_options(c);
    // Collective: the servers' and the workers' constructors broadcast rank 0's parameters.
    if (world_->rank() < c.servers) {
      server_.emplace(model_->parameters(), world_,
                      [this, options](std::vector<Variable> shard) {
                        return server_optimizer(shard.at(0), options);
                      },
                      options);
      serving_.emplace(*server_, c.lr);
    } else {
      worker_.emplace(model_->parameters(), world_, c.lr, options);
    }
    dist::broadcast_buffers(*model_, *world_, 0);
  }

  double train_step(const Tensor& inputs, const Tensor& targets) override {
    const int64_t iteration = iteration_++;
    if (server_) {
      // The batch is not used: the workers' pushes of this iteration are the server's work.
      server_->serve_until(iteration + 1);
      return server_->iteration_loss(iteration);
    }
    if (!worker_->pulled()) worker_->pull();  // shared batches: next_batch pulled
    worker_->zero_grad();
    const Variable loss = autocast_loss(
        precision_, [this](const Variable& x) { return model_->forward(x); }, criterion_, inputs,
        targets);
    precision_.scaler().scale(loss).backward();
    worker_->set_loss(loss.item());
    return loss.item();
  }

  Tensor predict(const Tensor& inputs) override {
    return autocast_predict(precision_, [this](const Variable& x) { return model_->forward(x); },
                            inputs);
  }
  optim::Optimizer& optimizer() override {
    if (server_) return *serving_;
    return *worker_;
  }

  // --batch-assignment=shared: a worker's next batch comes with its pull (server 0's queue);
  // a server serves the epoch, training on nothing.
  bool assigns_batches() const override { return config_.batch_assignment == "shared"; }
  int64_t next_batch(int64_t epoch, int64_t batches) override {
    if (server_) {
      if (served_epoch_ < epoch) {
        server_->serve_epoch(epoch, batches);
        served_epoch_ = epoch;
      }
      return kNoBatch;
    }
    const int64_t b = worker_->pull_batch(epoch);
    return b == dist::SharedBatchQueue::kEpochEnd ? kNoBatch : b;
  }

  // Training data: the workers' shards (a server's loader reads worker 0's, unused).
  // Evaluation: every rank holds the whole model then, so the test set is split over all.
  int replicas() const override { return world_->size() - config_.servers; }
  int replica() const override { return worker_ ? worker_->worker() : 0; }
  int evaluation_replicas() const override { return world_->size(); }
  int evaluation_replica() const override { return world_->rank(); }
  std::shared_ptr<dist::ProcessGroup> replica_group() const override { return world_; }

  // Before evaluation: the servers' parameters and the workers' mean statistics, everywhere.
  void sync_buffers() override {
    gather_parameters();
    const dist::ParameterServerLayout layout(world_->size(), async_options(config_),
                                             model_->num_parameters());
    dist::average_worker_buffers(layout, *world_, model_->buffers());
  }

  // Checkpoints (between epochs, the servers idle: every push of the epoch applied, no pull for
  // the next one yet). The model: the servers' shards gathered on every rank, as evaluated.
  StateDict model_state(const nn::Module& model) override {
    gather_parameters();
    return model.state_dict();
  }
  void load_model_state(nn::Module& model, const Checkpoint& checkpoint) override {
    Strategy::load_model_state(model, checkpoint);  // every rank; a worker's pull overwrites it
    if (server_) server_->load_parameters(model_->parameters());
  }
  // The servers' optimizer states laid end to end and cut into the unsplit model's format
  // (dist/async/server_state.h), with the schedule's learning rate, on rank 0 (server 0): one
  // process, DDP, ZeRO and asynchronous SGD on any number of servers resume from it.
  StateDict optimizer_state() override {
    if (!server_) return StateDict();
    const std::vector<StateDict> states = server_->gather_optimizer_states();
    if (states.empty()) return StateDict();  // not server 0
    StateDict out;
    for (const auto& [key, t] : serving_->state_dict()) {
      if (!optim::has_state_prefix(key)) out.set(key, t);
    }
    out.merge(dist::unsplit_optimizer_state(states, server_->layout(), model_->parameters(),
                                            state_numbering_));
    return out;
  }
  void load_optimizer_state(const Checkpoint& checkpoint) override {
    if (!server_) {
      // A worker's only option is the learning rate it pushes.
      if (const Tensor* lr = checkpoint.optimizer.find("param_groups.0.lr")) {
        worker_->param_groups()[0].options->set_lr(lr->item());
      }
      return;
    }
    Checkpoint mine = checkpoint;
    try {
      mine.optimizer = dist::shard_optimizer_state(checkpoint.optimizer, server_->layout(),
                                                   world_->rank(), model_->parameters(),
                                                   state_numbering_);
    } catch (const Error& e) {
      TS_FAIL("load_checkpoint: '", checkpoint.path, "' (tensors 'optimizer.*'): ", e.message());
    }
    tessera::load_optimizer_state(mine, *serving_);
  }
  // The workers' clocks (SSP iteration counts: the pushes each made), "async.clocks" [W]; the
  // rest of the servers' state follows from them (parameter_server.h). A checkpoint of another
  // strategy has none: the clocks start at 0.
  StateDict extra_state() override {
    StateDict out;
    if (server_ && world_->rank() == 0) {
      const std::vector<int64_t> clocks = server_->clocks();
      out.set(kClocks, from_vector<int64_t>(clocks, {static_cast<int64_t>(clocks.size())}));
    }
    return out;
  }
  void load_extra_state(const Checkpoint& checkpoint, bool lead) override {
    const Tensor* saved = checkpoint.extra.find(kClocks);
    if (saved == nullptr) return;
    const int workers = world_->size() - config_.servers;
    if (saved->numel() != workers) {
      if (lead) {
        std::printf("%s: the workers' clocks start at 0 (the checkpoint holds %lld workers' "
                    "clocks, this run has %d workers)\n",
                    checkpoint.path.c_str(), static_cast<long long>(saved->numel()), workers);
      }
      return;
    }
    const Tensor values = saved->to(kF64).contiguous();
    std::vector<int64_t> clocks;
    for (int w = 0; w < workers; ++w) clocks.push_back(static_cast<int64_t>(values.data<double>()[w]));
    // Per-worker batches keep every worker at the same iteration at an epoch's end; a checkpoint
    // of shared batches (each worker at its own count) continues with all at the furthest.
    if (!assigns_batches()) {
      clocks.assign(clocks.size(), *std::max_element(clocks.begin(), clocks.end()));
    }
    if (server_) {
      server_->restore_clocks(clocks);
      iteration_ = *std::min_element(clocks.begin(), clocks.end());
    } else {
      worker_->restore_clock(clocks[worker_->worker()]);
    }
  }

  std::vector<NamedGroup> groups() const override { return {{"world", world_.get()}}; }
  // Workers run ahead of each other (up to the bound): no collective between steps.
  bool checks_steps_over_world() const override { return false; }
  std::vector<Variable> model_state_parameters() const override {
    if (server_) return {server_->shard()};
    return model_->parameters();
  }

  void report(json::Object& summary, bool lead) override {
    // Collective: every server's updates, and the workers' time in pull.
    const dist::StalenessStats mine = server_ ? server_->staleness() : dist::StalenessStats();
    const dist::StalenessStats all = mine.sum_over(*world_);
    const double updates = dist::all_reduce_scalar(
        server_ ? static_cast<double>(server_->updates_applied()) : 0.0, *world_,
        dist::ReduceOp::kSum);
    const double pull_seconds = dist::all_reduce_scalar(
        worker_ ? worker_->pull_seconds() : 0.0, *world_, dist::ReduceOp::kSum);
    const double held_seconds = dist::all_reduce_scalar(
        server_ ? server_->held_seconds() : 0.0, *world_, dist::ReduceOp::kSum);
    if (!lead) return;
    const int workers = world_->size() - config_.servers;
    const dist::SSPClock rule(workers, config_.staleness_bound);
    json::Object s;
    s.add("unit", "updates applied between a worker's pull and its push, per shard update")
        .add("mean", all.mean())
        .add("max", all.max())
        // No bound: null (JSON's "none"), for both.
        .add_raw("bound", config_.staleness_bound < 0 ? "null" : std::to_string(config_.staleness_bound))
        .add_raw("max_allowed", config_.staleness_bound < 0 ? "null" : std::to_string(rule.max_updates_between()))
        .add("histogram", json::Array(all.histogram()))
        .add("lag_max", all.max_lag())
        .add("lag_mean", all.mean_lag());
    summary.add_raw("staleness", s.str());
    json::Array servers;  // the first config_.servers ranks serve
    for (int r = 0; r < config_.servers; ++r) servers.add(r);
    json::Object p;
    p.add("server_ranks", servers)
        .add("workers", workers)
        .add("updates_applied", static_cast<int64_t>(updates))
        .add("updates_per_server", static_cast<int64_t>(updates) / config_.servers)
        .add("staleness_aware_lr", config_.staleness_aware_lr ? "true" : "false")
        .add("pull_seconds_per_worker", pull_seconds / workers)
        .add("held_seconds_per_worker", held_seconds / workers)
        .add("evaluated", "the servers' parameters, the workers' mean BatchNorm statistics")
        .add("batch_assignment", config_.batch_assignment);
    if (assigns_batches()) {
      p.add("batches_per_worker", json::Array(server_->batches_per_worker()));
    }
    summary.add_raw("parameter_server", p.str());
  }

 private:
  static constexpr const char* kClocks = "async.clocks";

  // The optimizer of this server's shard of the flat parameters. One group (every model but a
  // GPT with weight decay): the flags' optimizer over the shard, as one parameter. A GPT's decay
  // and no-decay groups: the shard cut where the group changes, each piece stepped under its
  // group's options (dist::zero::GroupedShardOptimizer, as ZeRO cuts its shards); its state is
  // still "state.0.NAME" over the shard, and a checkpoint numbers it as one process's optimizer
  // over the same groups does (state_numbering_: the decay group first).
  std::unique_ptr<optim::Optimizer> server_optimizer(const Variable& shard,
                                                     const dist::AsyncOptions& options) {
    const std::vector<Variable> params = model_->parameters();
    std::vector<optim::ParamGroup> groups = make_param_groups(config_, params, *model_);
    if (groups.size() == 1) return make_optimizer(config_, {shard}, *model_);
    for (const optim::ParamGroup& g : groups) {
      state_numbering_.insert(state_numbering_.end(), g.params.begin(), g.params.end());
    }
    std::vector<int64_t> numels;
    for (const Variable& p : params) numels.push_back(p.numel());
    int64_t numel = 0;
    for (int64_t n : numels) numel += n;
    const dist::ParameterServerLayout layout(world_->size(), options, numel);
    const int64_t begin = layout.shard_offset(world_->rank());
    dist::zero::FlatShard flat{shard, params, dist::zero::flat_layout(numels),
                               {begin, begin + layout.shard_numel(world_->rank())}};
    const Config c = config_;
    return std::make_unique<dist::zero::GroupedShardOptimizer>(
        std::vector<dist::zero::FlatShard>{flat}, groups,
        [c](std::vector<optim::ParamGroup> pieces) { return make_optimizer(c, std::move(pieces)); });
  }

  // Collective: every rank's parameters become the servers' shards.
  void gather_parameters() {
    if (server_) {
      server_->gather_parameters(model_->parameters());
    } else {
      worker_->gather_parameters();
    }
  }

  Config config_;
  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> world_;
  Criterion criterion_;
  MixedPrecision& precision_;
  std::optional<dist::ParameterServer> server_;
  std::optional<ServingOptimizer> serving_;
  std::optional<dist::AsyncWorker> worker_;
  int64_t iteration_ = 0, served_epoch_ = -1;
  // How the unsplit optimizer numbers its state: the groups' parameters in order (empty: the
  // model's order, one group).
  std::vector<Variable> state_numbering_;
};

}  // namespace

std::unique_ptr<Strategy> make_asynchronous(const Config& config,
                                            std::shared_ptr<nn::Sequential> model,
                                            std::shared_ptr<dist::ProcessGroup> world,
                                            Criterion criterion, MixedPrecision& precision) {
  return std::make_unique<Asynchronous>(config, std::move(model), std::move(world),
                                        std::move(criterion), precision);
}

}  // namespace train
}  // namespace tessera
