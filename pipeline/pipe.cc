#include "pipeline/pipe.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "dist/grad_reduction_claim.h"
#include "dist/work.h"
#include "dist/zero/zero_optimizer.h"
#include "nn/batch_norm.h"
#include "pipeline/balance.h"
#include "pipeline/microbatch.h"
#include "pipeline/partition.h"
#include "pipeline/tensor_header.h"
#include "pipeline/tied_gradients.h"
#include "pipeline/timing_model.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace pipeline {

const char* balance_name(Balance how) {
  switch (how) {
    case Balance::kUniform: return "uniform";
    case Balance::kParams: return "params";
    case Balance::kTime: return "time";
  }
  return "?";
}
namespace {

// Every rank must cut the model the same way; a measured balance differs from rank to rank,
// so rank 0's is broadcast.
std::vector<int> agree(const std::vector<int>& balance, dist::ProcessGroup& group) {
  Tensor t = zeros({static_cast<int64_t>(balance.size())}, kI64);
  for (size_t i = 0; i < balance.size(); ++i) t.data<int64_t>()[i] = balance[i];
  group.broadcast(t, 0)->wait();
  std::vector<int> out;
  for (int64_t b : t.to_vector<int64_t>()) out.push_back(static_cast<int>(b));
  return out;
}

// A stage without parameters trains nothing and cannot have an optimizer. Every rank holds
// the whole model and the balance, so each checks every stage: the error is the same on all
// ranks and comes before any message.
void check_every_stage_has_parameters(const std::vector<std::shared_ptr<nn::Sequential>>& parts,
                                      const std::vector<TiedParameter>& tied, int stages,
                                      const std::vector<int>& balance) {
  for (int s = 0; s < stages; ++s) {
    // A copy of a tied parameter is a parameter of the stage (a last stage of just lm_head).
    int64_t count = std::count_if(tied.begin(), tied.end(),
                                  [s](const TiedParameter& t) { return t.held_by(s); });
    std::string layers;
    for (size_t p = s; p < parts.size(); p += stages) {
      count += parts[p]->num_parameters();
      for (size_t i = 0; i < parts[p]->size(); ++i) {
        layers += (layers.empty() ? "" : ", ") + parts[p]->name_at(i) + " (" +
                  (*parts[p])[i]->type_name() + ")";
      }
    }
    TS_CHECK(count > 0, "Pipe: stage ", s, " would hold no parameters (layers ", layers,
             ") with balance ", balance, "; give every stage a layer with parameters (another "
             "balance, fewer stages or chunks)");
  }
}

}  // namespace

Pipe::Pipe(std::shared_ptr<nn::Sequential> model, std::shared_ptr<dist::ProcessGroup> pipeline_group,
           LossFunction loss, const PipeOptions& options)
    : model_(std::move(model)), group_(std::move(pipeline_group)), options_(options) {
  TS_CHECK(model_ != nullptr, "Pipe: no model");
  TS_CHECK(group_ != nullptr, "Pipe: no pipeline process group");
  TS_CHECK(options.microbatches() >= 1, "Pipe: microbatches must be at least 1, got ",
           options.microbatches());
  TS_CHECK(options.chunks_per_rank() >= 1, "Pipe: chunks_per_rank must be at least 1, got ",
           options.chunks_per_rank());
  schedule_ = parse_schedule(options.schedule());
  TS_CHECK(schedule_ == ScheduleKind::kInterleaved || options.chunks_per_rank() == 1, "Pipe: the ",
           options.schedule(), " schedule runs one chunk per rank, got chunks_per_rank = ",
           options.chunks_per_rank(), " (use schedule \"interleaved\")");
  stages_ = group_->size();
  stage_ = group_->rank();
  TS_CHECK(schedule_ != ScheduleKind::kInterleaved || stages_ >= 2,
           "Pipe: the interleaved schedule needs at least 2 stages, the pipeline group has ", stages_);
  const int parts = stages_ * options.chunks_per_rank();
  const int layers = static_cast<int>(model_->size());
  TS_CHECK(parts <= layers, "Pipe: ", parts, " pipeline parts (", stages_, " stages x ",
           options.chunks_per_rank(), " chunks) but the model has only ", layers, " layers");
  const std::string& spec = options.balance();
  if (spec == "uniform") {
    balance_ = balance_uniform(layers, parts);
  } else if (spec == "params") {
    balance_ = balance_by_parameters(*model_, parts);
  } else if (spec == "time") {
    TS_CHECK(options.sample().defined(),
             "Pipe: balance \"time\" needs a sample micro-batch (PipeOptions::sample)");
    balance_ = agree(balance_by_time(*model_, parts, options.sample()), *group_);
    if (options.data_parallel_group()) balance_ = agree(balance_, *options.data_parallel_group());
  } else {
    balance_ = parse_balance(spec);
    TS_CHECK(static_cast<int>(balance_.size()) == parts, "Pipe: balance ", spec, " has ",
             balance_.size(), " entries but the pipeline has ", parts, " parts (", stages_,
             " stages x ", options.chunks_per_rank(), " chunks)");
  }
  parts_ = partition(*model_, balance_);
  tied_ = find_tied_parameters(*model_, balance_, stages_, options.ties());
  check_every_stage_has_parameters(parts_, tied_, stages_, balance_);
  chunks_ = parts_of_rank(parts_, stage_, stages_);
  // This rank's parameters: its chunks' and the tied parameters it uses, each once (a tied
  // parameter may be registered by two of its chunks), in the model's order; the rest belong
  // to other stages.
  std::set<const VariableImpl*> mine;
  for (const auto& chunk : chunks_) {
    for (const Variable& p : chunk->parameters()) mine.insert(p.impl());
  }
  for (const TiedParameter& t : tied_) {
    if (t.held_by(stage_)) mine.insert(t.variable.impl());
  }
  const auto named = model_->named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    if (mine.count(named[i].second.impl()) != 0) {
      parameters_.push_back(named[i].second);
      parameter_indices_.push_back(static_cast<int64_t>(i));
    } else {
      foreign_.push_back(named[i]);
    }
  }
  // The copies start as their owners' values (a model built from the same seed already has them).
  copy_owner_values(tied_, *group_);
  executor_ = std::make_unique<StageExecutor>(chunks_, group_, std::move(loss),
                                              parse_checkpoint(options.checkpoint()));
  if (options.deferred_batch_norm()) {
    for (const auto& chunk : chunks_) {
      for (const auto& [name, module] : chunk->named_modules()) {
        if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(module)) {
          bn->defer_running_statistics(true);
          deferred_batch_norms_.push_back(bn);
        }
      }
    }
  }
  // With a data-parallel group, Pipe averages this stage's gradients itself: DDP or ZeRO on the
  // same parameters would reduce them twice.
  if (options.data_parallel_group()) {
    claim_ = dist::GradReductionClaim(parameters(), "Pipe (data-parallel all-reduce)");
  }
}

std::vector<Variable> Pipe::owned_parameters() const {
  std::vector<Variable> out;
  for (const Variable& p : parameters_) {
    const auto copy = std::find_if(tied_.begin(), tied_.end(), [&](const TiedParameter& t) {
      return t.variable.is_same(p) && t.owner != stage_;
    });
    if (copy == tied_.end()) out.push_back(p);
  }
  return out;
}

void Pipe::use_zero_optimizer(dist::ZeroRedundancyOptimizer& zero) {
  TS_CHECK(zero.stage() == 1 || zero.stage() == 2, "Pipe::use_zero_optimizer: ZeRO stage ",
           zero.stage(), " (stages 1 and 2 step a pipeline stage's parameters)");
  for (const TiedParameter& t : tied_) {
    if (!t.held_by(stage_)) continue;
    const bool stepped = std::any_of(zero.params().begin(), zero.params().end(),
                                     [&](const Variable& p) { return p.is_same(t.variable); });
    TS_CHECK(stepped, "Pipe::use_zero_optimizer: the optimizer does not step tied parameter ",
             t.name, ", which stage ", stage_, " holds (make it over pipe.parameters())");
  }
  zero_ = &zero;
  // ZeRO-2 reduces each backward's gradients as they arrive, each parameter's once; under a
  // zero-bubble schedule a micro-batch's backward is its B and its W, with other micro-batches'
  // B between them: every parameter gradient then waits for W (executor.h), so that each W is
  // one complete backward to ZeRO-2, reduced after the micro-batch's last gradient.
  executor_->defer_parameter_gradients(zero.stage() == 2);
}

double Pipe::train_step(const Tensor& input, const Tensor& target) {
  const std::vector<Microbatch> microbatches =
      split_microbatches(input, target, options_.microbatches());
  // Other stages' parameters get no gradient here unless a layer of this stage reads one
  // without its use being known: undeclared_uses() looks after the batch.
  for (const auto& [name, p] : foreign_) p.zero_grad(/*set_to_none=*/true);
  last_microbatches_ = static_cast<int>(microbatches.size());
  if (schedule_ == ScheduleKind::kInterleaved) {
    TS_CHECK(last_microbatches_ % stages_ == 0, "Pipe: a batch of ", input.size(0),
             " rows gives ", last_microbatches_, " micro-batches, which the interleaved schedule "
             "cannot run on ", stages_, " stages (it needs a multiple of the stage count)");
  }
  const std::vector<Action> actions =
      make_schedule(schedule_, stages_, last_microbatches_, stage_, options_.chunks_per_rank());
  // The process group's sends are buffered (non-blocking), so each goes out as soon as its
  // tensor exists rather than where a blocking transport would need it.
  const double local_loss = executor_->run(eager_sends(actions), microbatches);
  // Deferred BatchNorm: the batch's statistics, accumulated over its micro-batches, once.
  for (nn::BatchNorm2d* bn : deferred_batch_norms_) bn->commit_running_statistics();
  trace_ = executor_->spans();
  const double reduce_start = dist::steady_seconds();
  if (average_gradients_over_data_parallel_group()) {
    trace_.push_back({Action{}, true, reduce_start, dist::steady_seconds()});
  }
  // The tied parameters' gradients summed over their holders (tied_gradients.h).
  std::string problem = sum_tied_gradients(tied_, *group_, zero_);
  if (problem.empty()) problem = undeclared_uses();
  // The loss lives on the last stage (0 elsewhere), a problem may be found on any: one sum over
  // the pipeline tells every rank both, so all of them stop together, before any optimizer step.
  Tensor agreed = zeros({1 + stages_}, kF64);
  agreed.data<double>()[0] = local_loss;
  agreed.data<double>()[1 + stage_] = problem.empty() ? 0 : 1;
  group_->all_reduce(agreed)->wait();
  TS_CHECK(problem.empty(), problem);
  for (int s = 0; s < stages_; ++s) {
    TS_CHECK(agreed.data<double>()[1 + s] == 0, "Pipe::train_step: stage ", s, " found a problem "
             "with a parameter used on several stages (its error names it)");
  }
  return agreed.data<double>()[0];
}


std::string Pipe::undeclared_uses() const {
  std::string names;
  for (const auto& [name, p] : foreign_) {
    if (p.grad().defined()) names += (names.empty() ? "" : ", ") + name;
  }
  if (names.empty()) return "";
  std::string layers;
  for (const auto& chunk : chunks_) {
    for (size_t i = 0; i < chunk->size(); ++i) layers += (layers.empty() ? "" : ", ") + chunk->name_at(i);
  }
  return "Pipe: a layer of stage " + std::to_string(stage_) + " (" + layers + ") reads " + names +
         ", which another stage holds, without registering it, so this stage's gradient of it "
         "would be lost (weight tying?): declare the use, PipeOptions().tie(\"NAME\", "
         "{\"LAYER\"}), and every stage using it keeps a copy whose gradients are summed";
}

Tensor Pipe::forward(const Tensor& input) {
  const std::vector<Microbatch> microbatches = split_microbatches(input, Tensor(), options_.microbatches());
  last_microbatches_ = static_cast<int>(microbatches.size());
  const int v = options_.chunks_per_rank();
  TS_CHECK(v == 1 || last_microbatches_ % stages_ == 0, "Pipe::forward: a batch of ",
           input.size(0), " rows gives ", last_microbatches_, " micro-batches, which ", v,
           " chunks per rank cannot run on ", stages_, " stages (it needs a multiple of the stage count)");
  const std::vector<Tensor> outputs =
      executor_->run_forward(forward_only(stages_, last_microbatches_, stage_, v), microbatches);
  trace_ = executor_->spans();
  // The last stage has the output; its shape and dtype go first so the others can allocate.
  const int last = stages_ - 1;
  Tensor out;
  Tensor header = zeros({kTensorHeaderLength}, kI64);
  if (stage_ == last) {
    out = cat(outputs, 0).contiguous();
    TS_CHECK(out.dim() <= kTensorHeaderMaxDims, "Pipe::forward: an output of shape ", out.shape(),
             " has more than ", kTensorHeaderMaxDims, " dimensions");
    write_tensor_header(out, header.data<int64_t>());
  }
  group_->broadcast(header, last)->wait();
  if (stage_ != last) {
    const int64_t* h = header.data<int64_t>();
    out = empty(tensor_header_shape(h), tensor_header_dtype(h));
  }
  group_->broadcast(out.view({out.numel()}), last)->wait();
  return out;
}

bool Pipe::average_gradients_over_data_parallel_group() {
  const auto& dp = options_.data_parallel_group();
  if (!dp || dp->size() == 1) return false;
  // One flat buffer per dtype, as DDP's buckets never mix dtypes: half-precision parameters
  // (--param-dtype) sit beside BatchNorm's f32 ones in the same stage. Every replica of this
  // stage lists the same parameters in the same order, so the buffers and their all-reduces
  // pair up, in the order each dtype first appears.
  const std::vector<Variable> params = parameters();
  if (params.empty()) return false;
  std::vector<DType> dtypes;
  for (const Variable& p : params) {
    if (std::find(dtypes.begin(), dtypes.end(), p.dtype()) == dtypes.end()) dtypes.push_back(p.dtype());
  }
  for (DType dtype : dtypes) {
    std::vector<Tensor> grads;
    for (const Variable& p : params) {
      if (p.dtype() != dtype) continue;
      grads.push_back((p.grad().defined() ? p.grad() : zeros_like(p.data())).contiguous().view({p.numel()}));
    }
    Tensor flat = cat(grads, 0);
    dp->all_reduce(flat, dist::ReduceOp::kMean)->wait();
    int64_t at = 0;
    for (const Variable& p : params) {
      if (p.dtype() != dtype) continue;
      p.set_grad(flat.narrow(0, at, p.numel()).view(p.shape()).clone());
      at += p.numel();
    }
  }
  return true;
}

void Pipe::gather_model() {
  // Part p is trained by rank p % K; every rank walks the parts in the same order, so the
  // broadcasts pair up.
  // A tied parameter registered by two parts goes once, from the first (the copies are equal).
  std::set<const VariableImpl*> sent;
  for (size_t p = 0; p < parts_.size(); ++p) {
    const int owner = static_cast<int>(p % stages_);
    auto tensors = parts_[p]->named_parameters();
    for (const auto& b : parts_[p]->named_buffers()) tensors.push_back(b);
    for (const auto& [name, v] : tensors) {
      if (!sent.insert(v.impl()).second) continue;
      TS_CHECK(v.data().is_contiguous(), "Pipe::gather_model: ", name, " is not contiguous");
      group_->broadcast(v.data().view({v.numel()}), owner)->wait();
    }
  }
}

std::string Pipe::chrome_trace() const {
  return chrome_trace_json(gather_trace(trace_, *group_), options_.chunks_per_rank() > 1);
}

std::string Pipe::bubble_report() const {
  const int v = options_.chunks_per_rank(), M = last_microbatches_;
  char line[300];
  if (schedule_ == ScheduleKind::kZBH1 || schedule_ == ScheduleKind::kZBH2) {
    std::string formula;
    const double predicted = predicted_bubble(schedule_, stages_, M, v, &formula);
    std::snprintf(line, sizeof(line), "stage %d/%d (%s, M=%d, v=%d): idle %.3f measured, bubble %.3f (%s)",
                  stage_, stages_, schedule_name(schedule_), M, v, stats().idle_fraction(), predicted,
                  formula.c_str());
    return line;
  }
  std::snprintf(line, sizeof(line),
                "stage %d/%d (%s, M=%d, v=%d): idle %.3f measured, bubble (K-1)/(vM+K-1) = %d/%d = %.3f",
                stage_, stages_, schedule_name(schedule_), M, v, stats().idle_fraction(), stages_ - 1,
                v * M + stages_ - 1, bubble_fraction(stages_, M, v));
  return line;
}

}  // namespace pipeline
}  // namespace tessera
