#include "tools/explain/memory_measure.h"

#include <memory>
#include <optional>

#include "autograd/functions.h"
#include "dist/ddp/ddp.h"
#include "dist/tensor_parallel/class_parallel_head.h"
#include "dist/tensor_parallel/gpt_plan.h"
#include "dist/tensor_parallel/parallelize.h"
#include "dist/zero/fully_sharded.h"
#include "dist/zero/zero_optimizer.h"
#include "models/gpt.h"
#include "nn/loss.h"
#include "pipeline/pipe.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace explain {

namespace {

// One strategy's two steps on this rank: {parameters, gradients, optimizer, peak, the stage's
// parameter elements (a pipeline's; else 0)}.
std::vector<int64_t> measure_one(const std::string& strategy, const std::string& name,
                                 const cost::ModelInput& input, int64_t batch,
                                 const cost::TrainingSetup& setup,
                                 const std::shared_ptr<dist::ProcessGroup>& world) {
  manual_seed(0);
  std::shared_ptr<nn::Sequential> model = cost::build_model(name, input);
  model->train();
  // Mixed precision: bf16 parameters (BatchNorm's stay f32), f32 masters in the optimizer or,
  // under ZeRO-3, in the f32 flat shards (as train --param-dtype=bf16).
  const DType dtype = setup.precision == cost::Precision::kMixed ? kBF16 : kF32;
  model->to(dtype);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<dist::FullyShardedDataParallel> fsdp;
  std::unique_ptr<pipeline::Pipe> pipe;
  std::unique_ptr<optim::Optimizer> opt;
  std::optional<dist::tensor_parallel::ClassParallelHead> head;  // tensor parallel, not the MLP
  std::optional<dist::tensor_parallel::VocabParallelLM> vocabulary;  // tensor parallel, a GPT
  // The Variables whose data and gradients are this rank's model states (as the train tool's).
  std::vector<Variable> states = model->parameters();
  if (strategy == "ddp") {
    ddp = std::make_unique<dist::DistributedDataParallel>(model, world);
    opt = cost::make_optimizer(setup, model->parameters());
  } else if (strategy == "zero1" || strategy == "zero2") {
    opt = std::make_unique<dist::ZeroRedundancyOptimizer>(
        model->parameters(), world,
        [&](std::vector<Variable> shard) { return cost::make_optimizer(setup, std::move(shard)); },
        dist::ZeroOptions().stage(strategy == "zero1" ? 1 : 2));
  } else if (strategy == "tensor_parallel") {
    // T = N ranks, split as tools/train and cost/model_catalog.h split them: the MLP's block
    // (fc1 by columns, fc2 by rows), any other model's classifier by class.
    namespace tp = dist::tensor_parallel;
    if (input.text()) {
      vocabulary.emplace(tp::parallelize_gpt(*model, world));  // Megatron's blocks and vocabulary
    } else if (name == "mlp") {
      tp::parallelize_module(*model, world, {{"fc1", tp::Style::kColumnwise}, {"fc2", tp::Style::kRowwise}});
    } else {
      head.emplace(tp::parallelize_classifier(*model, world));
    }
    model->to(dtype);  // the new layers' parameters too
    opt = cost::make_optimizer(setup, model->parameters());
    states = model->parameters();
  } else if (strategy == "pipeline") {
    // One stage a rank, balanced by parameters (as cost/memory.h's row assumes), 4 micro-batches.
    // A GPT's loss is the language model's (its targets the window's own ids: y below).
    pipeline::LossFunction loss = nn::CrossEntropyLoss();
    if (input.text()) loss = [](const Variable& logits, const Tensor& ids) { return models::lm_loss(logits, ids); };
    pipe = std::make_unique<pipeline::Pipe>(
        model, world, loss, pipeline::PipeOptions().microbatches(4).balance("params"));
    opt = cost::make_optimizer(setup, pipe->parameters());
    states = pipe->parameters();
  } else {
    fsdp = std::make_unique<dist::FullyShardedDataParallel>(model, world);
    opt = cost::make_optimizer(setup, fsdp->shard_parameters());
    states = fsdp->shard_parameters();  // and the model's own, released outside forward/backward
    for (const Variable& p : model->parameters()) states.push_back(p);
  }
  const Tensor x = input.text() ? cost::example_batch(input, batch)  // token ids stay integers
                                : cost::example_batch(input, batch).to(dtype);
  const Tensor y = input.text() ? x : zeros({batch}, kI64);  // a GPT's: the window's own ids
  dist::zero::ModelStateBytes measured;
  auto step = [&](bool measure) {
    if (pipe) {  // forward and backward of every micro-batch, as the schedule runs them
      opt->zero_grad();
      pipe->train_step(x, y);
      if (measure) measured = dist::zero::measured_model_state(states, *opt);
      opt->step();
      return;
    }
    const Variable in(x);
    const Variable out = ddp ? ddp->forward(in) : fsdp ? fsdp->forward(in) : model->forward(in);
    const Variable loss = head         ? head->loss(out, y)
                          : vocabulary ? vocabulary->loss(out, x)  // against the window's own ids
                                       : cost::example_loss(input, out, batch);
    opt->zero_grad();
    loss.backward();
    if (measure) measured = dist::zero::measured_model_state(states, *opt);
    opt->step();
  };
  step(false);
  reset_peak(Device::cpu());
  step(true);
  int64_t stage_parameters = 0;
  if (pipe) {
    for (const Variable& p : pipe->parameters()) stage_parameters += p.data().numel();
  }
  return {measured.parameters, measured.gradients, measured.optimizer,
          memory_stats(Device::cpu()).peak_bytes, stage_parameters};
}

}  // namespace

std::vector<MeasuredStrategy> measure_model_states(const std::string& model,
                                                   const cost::ModelInput& input, int64_t batch,
                                                   const cost::TrainingSetup& setup,
                                                   const std::shared_ptr<dist::ProcessGroup>& world) {
  std::vector<MeasuredStrategy> out;
  const int n = world->size();
  std::vector<std::string> strategies = {"ddp", "zero1", "zero2", "zero3"};
  if (n > 1) {
    strategies.push_back("pipeline");         // a stage per rank
    strategies.push_back("tensor_parallel");  // T = N
  }
  for (const std::string& strategy : strategies) {
    const std::vector<int64_t> mine = measure_one(strategy, model, input, batch, setup, world);
    const int64_t per = static_cast<int64_t>(mine.size());
    Tensor gathered = empty({per * n}, kI64);
    world->all_gather(from_vector<int64_t>(mine, {per}), gathered)->wait();
    const std::vector<int64_t> all = gathered.to_vector<int64_t>();
    MeasuredStrategy s{strategy, {}};
    for (int r = 0; r < n; ++r) {
      const int64_t* f = &all[r * per];
      s.ranks.push_back({{f[0], f[1], f[2]}, f[3], f[4]});
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace explain
}  // namespace tessera
