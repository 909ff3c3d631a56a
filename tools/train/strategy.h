// How the train tool parallelizes a step: it only chooses. One process, DDP (the model wrapped,
// an ordinary optimizer), ZeRO stage 1 or 2 (the model as it is, dist::ZeroRedundancyOptimizer
// as the optimizer), ZeRO stage 3 (dist::FullyShardedDataParallel, the optimizer over its
// shards cut by the parameter groups) or a pipeline (pipeline::Pipe over K stages, data
// parallel over the other N/K ranks through dist::Topology); with --tensor-parallel, DDP or
// ZeRO-1 over the data-parallel groups of a model whose layers dist::tensor_parallel has split
// (tensor_parallel.h).
// The library does the work. Each strategy has a file of its own: data_parallel.h (one process,
// DDP, ZeRO-1/2), fully_sharded.h (ZeRO-3), pipelined.h, local_sgd.h, decentralized.h (gossip)
// and asynchronous.h (parameter servers); make_strategy picks one.
#pragma once

#include <memory>

#include "dist/checkpoint.h"
#include "dist/process_group.h"
#include "dist/topology.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"
#include "pipeline/pipe.h"
#include "tools/train/flags.h"
#include "tools/train/precision.h"
#include "tools/train/report.h"

namespace tessera {
namespace train {

// The loss of a batch (mean over its rows): the criterion.
using Criterion = std::function<Variable(const Variable& output, const Tensor& target)>;

// What the model's output is and how to read it: the loss of a batch and the predicted class of
// each row. Ordinary logits, or a class-parallel head's slice of them (tensor_parallel.h).
struct Head {
  Criterion loss;
  std::function<Tensor(const Tensor& output)> predicted_classes;
  // Rows of the output with their last dimension whole: themselves, or, for logits split by
  // vocabulary (a GPT under --tensor-parallel), an all-gather of every rank's slice (collective).
  std::function<Tensor(const Tensor& output)> whole_rows = [](const Tensor& rows) { return rows; };
};

// A process group and what it connects, for the communication report ("world", "pipeline",
// "data-parallel", "tensor-parallel").
struct NamedGroup {
  const char* name;
  dist::ProcessGroup* group;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // One batch: zeroes the gradients, runs forward and loss under autocast and backward of the
  // scaled loss. Returns the batch loss (unscaled). The caller steps (MixedPrecision::step).
  virtual double train_step(const Tensor& inputs, const Tensor& targets) = 0;
  // Evaluation: the model's output for a batch, without a graph (model in eval mode).
  virtual Tensor predict(const Tensor& inputs) = 0;
  // The optimizer: steps, the schedule's learning rate, checkpoints (state_dict is collective
  // for ZeRO: every rank must call it) and state bytes.
  virtual optim::Optimizer& optimizer() = 0;

  // Data parallelism: this rank reads shard replica() of replicas(); per-replica figures
  // (test counts) are summed over replica_group(), which holds one rank of each replica
  // (null for one process).
  virtual int replicas() const = 0;
  virtual int replica() const = 0;
  virtual std::shared_ptr<dist::ProcessGroup> replica_group() const = 0;
  // Evaluation reads test shard evaluation_replica() of evaluation_replicas() (the training's
  // split unless every rank holds the whole model then: asynchronous SGD's servers do too).
  virtual int evaluation_replicas() const { return replicas(); }
  virtual int evaluation_replica() const { return replica(); }
  // Collective. Before evaluation: the ranks holding the same parameters take the same
  // BatchNorm statistics (replica 0's).
  virtual void sync_buffers() {}
  // Collective. The whole trained model's state under its own (unpipelined, unsharded) names,
  // for a checkpoint rank 0 saves; and its inverse, on every rank, for resuming.
  virtual StateDict model_state(const nn::Module& model) { return model.state_dict(); }
  virtual void load_model_state(nn::Module& model, const Checkpoint& checkpoint) {
    tessera::load_model_state(checkpoint, model);  // names, shapes and dtype kinds checked
  }
  // Whether checkpoints carry the optimizer's state (ZeRO-3's stays split over the ranks'
  // shards; a pipeline gathers its stages' into the unsplit model's format).
  virtual bool checkpoints_optimizer() const { return true; }
  // Collective. The optimizer's state as a checkpoint holds it (the unsplit model's format), and
  // its inverse, on every rank.
  virtual StateDict optimizer_state() { return optimizer().state_dict(); }
  virtual void load_optimizer_state(const Checkpoint& checkpoint) {
    tessera::load_optimizer_state(checkpoint, optimizer());  // keys and shapes checked
  }
  // --checkpoint-format=sharded (dist/zero/sharded_checkpoint.h), collective: every rank writes
  // its shard of the parameters and of the optimizer state into `dir`, rank 0 the index; only
  // ZeRO-1/2/3 shard (flag_rules.cc refuses the flag otherwise). And reading one, written on any
  // world size, into this run (one process, DDP and ZeRO read it; `extra` gets the saver's
  // strings). A pipeline's or a tensor-parallel run's split is not ZeRO's: they read full
  // checkpoints only.
  virtual void save_sharded(const std::string& dir, const TrainingProgress& progress,
                            const Metadata& extra);
  virtual TrainingProgress load_sharded(const std::string& dir, Metadata* extra);
  // Collective. State outside the model and optimizer that a resume needs (a compression
  // hook's residuals, every rank's), for the checkpoint's "extra" tensors; and its inverse,
  // given the checkpoint on every rank.
  virtual StateDict extra_state() { return StateDict(); }
  virtual void load_extra_state(const Checkpoint& checkpoint, bool lead) {
    (void)checkpoint;
    (void)lead;
  }
  // Collective. Adds the strategy's own figures to the final JSON (on rank 0) and prints its
  // report lines.
  virtual void report(json::Object& /*summary*/, bool /*lead*/) {}
  // Collective. --clip-grad-norm: scales this step's gradients (unscaled, after backward) so
  // that the global 2-norm of the whole model's averaged gradient is at most max_norm, through
  // optim's one clip (optim/clip_grad.h) with this strategy's layout: the default clips
  // optimizer().gradient_variables() as this rank's whole model (one process, DDP's averaged
  // gradients, a local-SGD, gossip or asynchronous worker's own); ZeRO, the pipeline and tensor
  // parallelism sum the squares over the ranks holding the other parts. Returns the norm
  // before clipping.
  virtual double clip_grad_norm(double max_norm);
  // The 2-norm of the gradients this rank holds (no communication), for the loop's finite check:
  // optimizer().gradient_variables()'s by default; ZeRO-3 with offloaded gradients counts those
  // in their store too.
  virtual double local_gradient_norm();
  // Called after every training step (a pipeline accumulates its idle time).
  virtual void after_step() {}
  // Whether the loop checks each step's loss and gradients over the world: one all-reduce per
  // step, so every rank stops at the same step with the same message. Strategies whose point is
  // to communicate less than a ring all-reduce every step (asynchronous SGD, local SGD, gossip)
  // check on each rank alone: a bad value ends the job through run_or_abort, without a
  // collective whose 2 (N-1) latencies would undo what they save.
  virtual bool checks_steps_over_world() const { return true; }
  // Batches handed out while the epoch runs instead of a fixed shard per replica (asynchronous
  // SGD's shared queue): the loop reads the whole training set (one loader, the same order on
  // every rank) and asks next_batch() for the number of the epoch's next batch until it returns
  // kNoBatch. A rank that trains on no batches (a parameter server) serves the whole epoch in
  // its first next_batch() and then returns kNoBatch.
  static constexpr int64_t kNoBatch = -1;
  virtual bool assigns_batches() const { return false; }
  virtual int64_t next_batch(int64_t /*epoch*/, int64_t /*batches*/) { return kNoBatch; }
  // The process groups this rank communicates over, each once (their byte ledgers count the
  // traffic): the world, and a pipeline's stage-to-stage, the data-parallel and the
  // tensor-parallel groups.
  virtual std::vector<NamedGroup> groups() const = 0;
  // The Variables whose data and gradients make this rank's model states (memory_report.h):
  // the model's parameters (this stage's, for a pipeline), and ZeRO-3's flat shards.
  virtual std::vector<Variable> model_state_parameters() const = 0;
};

// The parameter groups the flags choose over `params` of `model`: one group under the flags'
// options, or for a GPT (language_model) with weight decay two, models::weight_decay_groups'
// (the decay group, and the rest at weight decay 0), each in `params`' order. `params` must be
// the model's own, with their shapes (ZeRO hands its shards the groups, not the other way).
std::vector<optim::ParamGroup> make_param_groups(const Config& config, std::vector<Variable> params,
                                                 nn::Module& model);
// The optimizer the flags choose (--optimizer, --lr, --momentum, --weight-decay) over those
// groups (or ZeRO's pieces of them). A GPT's is AdamW's with betas (0.9, 0.95).
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& config,
                                                 std::vector<optim::ParamGroup> groups);
// Both: the optimizer over make_param_groups(config, params, model).
std::unique_ptr<optim::Optimizer> make_optimizer(const Config& config, std::vector<Variable> params,
                                                 nn::Module& model);

// world is null for --strategy=single; topology is null unless --tensor-parallel (the model's
// layers are then already split over its tensor-parallel groups, and DDP or ZeRO-1 runs over
// its data-parallel groups).
std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world,
                                        const dist::Topology* topology, Criterion criterion,
                                        MixedPrecision& precision, Device device);

}  // namespace train
}  // namespace tessera
