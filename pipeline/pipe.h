// Pipe: a Sequential trained with pipeline parallelism, in a few lines of a user's program.
//
//   auto world = dist::init(&argc, &argv);                  // mpirun -np 4 ./my_program
//   manual_seed(0);
//   auto model = models::MLP(784, 256, 10);                 // the same full model on every rank
//   pipeline::Pipe pipe(model, world, nn::CrossEntropyLoss(),    // or any (out, y) -> loss
//       pipeline::PipeOptions().microbatches(8).schedule(ScheduleKind::kOneFOneB).balance("params"));
//   optim::SGD opt(pipe.parameters(), optim::SGDOptions(0.1));   // this rank's stage only
//   for (auto [x, y] : batches) {                           // every rank passes the same batch
//     opt.zero_grad();
//     double loss = pipe.train_step(x, y);                  // the batch loss, on every rank
//     opt.step();
//   }
//   model->eval();
//   Tensor logits = pipe.forward(test_x);                   // forward-only, on every rank
//
// Rank s of the pipeline group runs stage s (with v chunks per rank: parts s, s+K, ...).
// train_step splits the batch into M micro-batches (fewer if the batch has fewer rows), runs
// the schedule, and leaves in each stage's parameters the gradient of the batch's loss, equal
// to the unpipelined model's on the same batch (micro-batch losses weighted by their share of
// the batch, microbatch.h). Only the first stage reads the input and only the last the target;
// the others use just the batch size. With a data-parallel group (dist::Topology gives one
// per stage), the stage's gradients are then averaged over it in one flat all-reduce per
// dtype (half-precision parameters beside BatchNorm's f32 ones: two), so
// P x D ranks train like D data-parallel replicas of the whole model. For ZeRO-1 instead,
// leave the group out and step a dist::ZeroRedundancyOptimizer over pipe.parameters() and the
// data-parallel group: its reduce-scatter averages the gradients.
//
// Tied parameters (one parameter used by layers of several stages: a GPT's token embedding,
// which its output projection reads) are kept by every stage that uses them and their
// gradients summed after the batch (tied_parameters.h), after the data-parallel average. With a
// ZeRO optimizer, give it to the Pipe (use_zero_optimizer): the gradients are where it keeps
// them (ZeRO-2: its shards, already averaged), and train_step sums them there.
//
// Bad options (more parts than layers, a balance that does not add up, an unknown schedule, a
// batch the interleaved schedule cannot cut) are errors raised identically on every rank
// before any message is sent. An error on one rank only (a throwing loss function) leaves its
// peers waiting for its messages: run the program's body under dist::run_or_abort().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/grad_reduction_claim.h"
#include "dist/process_group.h"
#include "nn/batch_norm.h"
#include "nn/sequential.h"
#include "pipeline/balance.h"
#include "pipeline/executor.h"
#include "pipeline/schedule.h"
#include "pipeline/tied_parameters.h"
#include "pipeline/trace.h"

namespace tessera {
namespace dist {
class ZeroRedundancyOptimizer;
}  // namespace dist
namespace pipeline {

// How Pipe cuts the model into parts: the same number of layers each, by parameter count, or by
// measured time (pipeline/balance.h).
enum class Balance { kUniform, kParams, kTime };
const char* balance_name(Balance how);  // "uniform", "params", "time"

class PipeOptions {
 public:
  // M, the micro-batches per batch (GPipe's "chunks").
  PipeOptions& microbatches(int m) { microbatches_ = m; return *this; }
  // "gpipe", "1f1b", "interleaved", or the zero-bubble "zb-h1" and "zb-h2" (backward split into
  // B and W: autograd/weight_grad.h; the optimizer steps after the batch's last W, so gradient
  // clipping and the loss scaler see the whole batch's gradients).
  // The typed form, ScheduleKind::kZBH1 and so on, is checked by the compiler; the string form
  // (for command lines) when the Pipe is made.
  PipeOptions& schedule(const std::string& name) { schedule_ = name; return *this; }
  PipeOptions& schedule(ScheduleKind kind) { schedule_ = schedule_name(kind); return *this; }
  // v, the model chunks per rank of the interleaved schedule.
  PipeOptions& chunks_per_rank(int v) { chunks_per_rank_ = v; return *this; }
  // "uniform", "params", "time" or an explicit list "3,4,3" (one entry per part: K*v of them).
  // The typed forms, Balance::kTime or {3, 4, 3}, are checked by the compiler; the string form
  // (for command lines) when the Pipe is made.
  PipeOptions& balance(const std::string& spec) { balance_ = spec; return *this; }
  PipeOptions& balance(Balance how) { balance_ = balance_name(how); return *this; }
  PipeOptions& balance(const std::vector<int>& layers_per_part) {
    balance_ = balance_spec(layers_per_part);
    return *this;
  }
  // Activation checkpointing per micro-batch: "never", "except_last" or "always" (executor.h).
  PipeOptions& checkpoint(const std::string& mode) { checkpoint_ = mode; return *this; }
  PipeOptions& checkpoint(Checkpoint mode) { checkpoint_ = checkpoint_name(mode); return *this; }
  // One micro-batch of input for balance "time" to profile with; a floating-point one is
  // converted to the model's input dtype (model_input_dtype in balance.h: f16 for a model
  // converted with to(kF16), whatever the sample's dtype).
  PipeOptions& sample(const Tensor& microbatch) { sample_ = microbatch; return *this; }
  // BatchNorm's running statistics updated once per batch from all its micro-batches (equal to
  // the unpipelined batch's, torchgpipe's DeferredBatchNorm), instead of once per micro-batch
  // (false, the default, which is what gradient accumulation does). Normalization itself always
  // uses each micro-batch's own statistics.
  PipeOptions& deferred_batch_norm(bool d) { deferred_batch_norm_ = d; return *this; }
  // Layers that read a parameter without registering it (weight tying: models::GPT's lm_head
  // reads "embed.wte.weight"). Every stage holding such a layer keeps a copy of the parameter,
  // stepped by its optimizer, and train_step sums the copies' gradients (tied_parameters.h).
  // Parameters registered by layers of several stages are found without it. Call once per
  // parameter; names as in the whole model (model->named_parameters(), its layers' names).
  PipeOptions& tie(const std::string& parameter, const std::vector<std::string>& layers) {
    ties_.push_back({parameter, layers});
    return *this;
  }
  // The ranks that hold the same stage; gradients are averaged among them after each batch.
  PipeOptions& data_parallel_group(std::shared_ptr<dist::ProcessGroup> g) {
    data_parallel_group_ = std::move(g);
    return *this;
  }

  int microbatches() const { return microbatches_; }
  const std::string& schedule() const { return schedule_; }
  int chunks_per_rank() const { return chunks_per_rank_; }
  const std::string& balance() const { return balance_; }
  const std::string& checkpoint() const { return checkpoint_; }
  const Tensor& sample() const { return sample_; }
  bool deferred_batch_norm() const { return deferred_batch_norm_; }
  const std::shared_ptr<dist::ProcessGroup>& data_parallel_group() const { return data_parallel_group_; }
  const std::vector<TiedUse>& ties() const { return ties_; }

 private:
  int microbatches_ = 4;
  std::string schedule_ = "1f1b";
  int chunks_per_rank_ = 1;
  std::string balance_ = "uniform";
  std::string checkpoint_ = "never";
  bool deferred_batch_norm_ = false;
  Tensor sample_;
  std::shared_ptr<dist::ProcessGroup> data_parallel_group_;
  std::vector<TiedUse> ties_;
};

class Pipe {
 public:
  // Collective over the pipeline group (and the data-parallel group for balance "time"):
  // every rank passes the same model, built from the same seed. `loss` is a loss module
  // (nn::CrossEntropyLoss(), nn::MSELoss()) or any function (output, target) -> loss; the last
  // stage calls it on each micro-batch.
  Pipe(std::shared_ptr<nn::Sequential> model, std::shared_ptr<dist::ProcessGroup> pipeline_group,
       LossFunction loss, const PipeOptions& options = PipeOptions());

  // One batch forward and backward; returns the batch loss on every rank of the pipeline.
  double train_step(const Tensor& input, const Tensor& target);
  // Evaluation: the forward-only schedule without a graph (set the model's eval() mode first).
  // Returns the model's output for the whole batch on every rank of the pipeline.
  Tensor forward(const Tensor& input);

  // Collective over the pipeline group: every part's parameters and buffers, broadcast from
  // the rank that trains it into the full model on every rank. Afterwards the model given to
  // the constructor is the whole trained model on every rank: save it as any model (its
  // state_dict() has the unpipelined names), or load a checkpoint into a fresh model and build
  // a Pipe over any number of stages from it.
  void gather_model();

  // This rank's parameters, in the model's order: its chunks', and its copies of tied
  // parameters whose owner is another stage. What its optimizer steps.
  const std::vector<Variable>& parameters() const { return parameters_; }
  // parameters() without those copies: across the pipeline each parameter of the model is owned
  // by one stage, so a norm over the whole model sums these (a copy would count twice).
  std::vector<Variable> owned_parameters() const;
  // Where each of parameters() sits in the whole model's parameters(): the numbering an
  // unpipelined optimizer's state uses (optimizer_state.h). Increasing; identical across the
  // ranks of a stage.
  const std::vector<int64_t>& parameter_indices() const { return parameter_indices_; }
  // The parameters used on more than one rank (tied_parameters.h), the same list on every rank.
  const std::vector<TiedParameter>& tied_parameters() const { return tied_; }
  // A ZeRO optimizer (stage 1 or 2) stepping parameters() over this stage's replicas: train_step
  // reduces the tied parameters' gradients where it keeps them (a buffer of their own averaged
  // over its group for stage 1; its averaged shards for stage 2), and for stage 2 under a
  // zero-bubble schedule holds each micro-batch's parameter gradients for its W, so that ZeRO-2
  // reduces them once each (executor.h: defer_parameter_gradients). Required when this rank
  // holds a tied parameter and a ZeRO optimizer (train_step says so otherwise), or ZeRO-2 and a
  // zero-bubble schedule; it must outlive the Pipe's steps.
  void use_zero_optimizer(dist::ZeroRedundancyOptimizer& zero);
  const std::shared_ptr<nn::Sequential>& model() const { return model_; }
  const std::vector<std::shared_ptr<nn::Sequential>>& chunks() const { return chunks_; }
  const std::shared_ptr<dist::ProcessGroup>& pipeline_group() const { return group_; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }
  ScheduleKind schedule() const { return schedule_; }
  // Layers per part, K*v entries, identical on every rank.
  const std::vector<int>& balance() const { return balance_; }
  // The last step: its micro-batch count, timing and activation memory on this rank.
  int last_microbatches() const { return last_microbatches_; }
  const StageStats& stats() const { return executor_->stats(); }
  // "stage 1/2 (1f1b, M=4): idle 0.231 measured, bubble (K-1)/(vM+K-1) = 1/5 = 0.200"
  std::string bubble_report() const;
  // The last step's spans on this rank (trace.h), the data-parallel all-reduce included.
  const std::vector<Span>& trace() const { return trace_; }
  // Collective over the pipeline group: the last step of every stage as a Chrome trace.
  std::string chrome_trace() const;

 private:
  // False when there is no data-parallel group (or it has one rank).
  bool average_gradients_over_data_parallel_group();
  // The parameters of other stages that got a gradient on this rank: a use of a parameter that
  // is neither registered nor declared (tied_parameters.h). "" when none.
  std::string undeclared_uses() const;

  std::shared_ptr<nn::Sequential> model_;
  std::shared_ptr<dist::ProcessGroup> group_;
  PipeOptions options_;
  ScheduleKind schedule_;
  int stages_, stage_;
  std::vector<int> balance_;
  std::vector<std::shared_ptr<nn::Sequential>> parts_;   // all K*v parts, in model order
  std::vector<std::shared_ptr<nn::Sequential>> chunks_;  // this rank's: parts s, s+K, ...
  std::vector<TiedParameter> tied_;
  std::vector<Variable> parameters_;       // this rank's, in the model's order
  std::vector<int64_t> parameter_indices_;  // their places in model_->parameters()
  std::vector<std::pair<std::string, Variable>> foreign_;  // the model's other parameters (other stages')
  dist::ZeroRedundancyOptimizer* zero_ = nullptr;  // use_zero_optimizer
  std::vector<nn::BatchNorm2d*> deferred_batch_norms_;    // in chunks_, with deferred statistics
  std::unique_ptr<StageExecutor> executor_;
  dist::GradReductionClaim claim_;  // with a data-parallel group: no DDP or ZeRO on these too
  int last_microbatches_ = 0;
  std::vector<Span> trace_;
};

}  // namespace pipeline
}  // namespace tessera
