#include "dist/zero/zero_optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/grad_mode.h"
#include "dist/device_groups.h"
#include "dist/grad_norm.h"
#include "dist/module_sync.h"
#include "dist/trace_recorder.h"
#include "optim/state_keys.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

std::vector<int64_t> sizes_of(const std::vector<zero::Range>& ranges) {
  std::vector<int64_t> sizes;
  for (const zero::Range& r : ranges) sizes.push_back(r.size());
  return sizes;
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Variable> params,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const OptimizerFactory& make_optimizer,
                                                 const ZeroOptions& options)
    : optim::Optimizer(nullptr), params_(std::move(params)), group_(std::move(group)),
      options_(options) {
  TS_CHECK(group_ != nullptr, "ZeroRedundancyOptimizer: group is null");
  TS_CHECK(!params_.empty(), "ZeroRedundancyOptimizer: got an empty parameter list");
  TS_CHECK(options_.stage() == 1 || options_.stage() == 2, "ZeroRedundancyOptimizer: stage ",
           options_.stage(), " is not 1 or 2 (stage 3 shards the parameters themselves)");
  TS_CHECK(options_.bucket_cap_mb() > 0, "ZeroRedundancyOptimizer: bucket_cap_mb must be "
           "positive, got ", options_.bucket_cap_mb());
  TS_CHECK(options_.reduce_dtype() == kF32 || options_.reduce_dtype() == kF16 ||
               options_.reduce_dtype() == kBF16,
           "ZeroRedundancyOptimizer: reduce_dtype must be f32, f16 or bf16, got ",
           options_.reduce_dtype());
  device_ = params_[0].data().device();
  std::vector<int64_t> numels;
  for (const Variable& p : params_) {
    TS_CHECK(p.data().device() == device_, "ZeroRedundancyOptimizer: parameter ", p.name(),
             " is on ", p.data().device(), ", the first on ", device_, " (one device per rank)");
    TS_CHECK(is_floating(p.dtype()) && p.is_leaf() && p.requires_grad(),
             "ZeroRedundancyOptimizer: parameter ", p.name(),
             " must be a floating-point leaf that requires grad (frozen parameters would still be "
             "changed by weight decay)");
    numels.push_back(p.numel());
  }
  claim_ = GradReductionClaim(params_, "ZeroRedundancyOptimizer (stage " +
                                           std::to_string(options_.stage()) + ")");
  comm_ = options_.use_device_group() ? group_for_device(group_, device_) : group_;
  // Every rank starts from rank 0's parameters, as with DDP.
  std::vector<std::pair<std::string, Variable>> named;
  for (const Variable& p : params_) named.emplace_back(p.name(), p);
  verify_same_parameters(named, *group_);
  broadcast_parameters(params_, *group_, 0);

  layout_ = zero::flat_layout(numels);
  shards_ = zero::balanced_shards(layout_.total, group_->size());
  flat_dtype_ = std::all_of(params_.begin(), params_.end(),
                            [](const Variable& p) { return p.dtype() == kF64; })
                    ? kF64
                    : kF32;
  Tensor flat = empty({layout_.total}, flat_options());
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::Range& r = layout_.ranges[i];
    flat.narrow(0, r.begin, r.size()).copy_(params_[i].data().reshape({-1}));
  }
  shard_ = Variable(flat.narrow(0, shard_offset(), shard_numel()).clone(), true);
  shard_.set_name("zero_shard");
  inner_ = make_optimizer({shard_});
  TS_CHECK(inner_ != nullptr, "ZeroRedundancyOptimizer: the factory returned no optimizer");
  TS_CHECK(dynamic_cast<optim::ElementwiseOptimizer*>(inner_.get()) != nullptr,
           "ZeroRedundancyOptimizer: the inner optimizer must update each element on its own "
           "(SGD, Adam, AdamW: an optim::ElementwiseOptimizer); stepping a shard is exact only "
           "then");
  // The outer group holds the full parameters and the options schedulers set; step() hands
  // the options to the inner optimizer.
  Optimizer::add_param_group(
      optim::ParamGroup(params_, inner_->param_groups()[0].options->clone()));

  if (options_.stage() == 2) {
    build_buckets();
    for (size_t i = 0; i < params_.size(); ++i) {
      hook_handles_.push_back(
          params_[i].register_grad_ready_hook([this, i](Variable&) { on_grad_ready(i); }));
    }
  }
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() {
  for (size_t i = 0; i < hook_handles_.size(); ++i) params_[i].remove_hook(hook_handles_[i]);
}

void ZeroRedundancyOptimizer::add_param_group(optim::ParamGroup) {
  TS_FAIL("ZeroRedundancyOptimizer: add_param_group is not supported (all parameters form one "
          "flat vector; pass them all to the constructor)");
}

std::vector<Variable> ZeroRedundancyOptimizer::gradient_variables() const {
  if (options_.stage() == 1 && !shard_grad_reduced_) return params_;
  return {shard_};
}

// ---- Stage 2: gradient buckets reduce-scattered during backward ------------------------------

void ZeroRedundancyOptimizer::build_buckets() {
  const double cap_bytes = options_.bucket_cap_mb() * 1024 * 1024;
  bucket_of_.assign(params_.size(), 0);
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    // Collected in reverse; the range runs from the lowest parameter to the highest.
    current.range = {layout_.ranges[current.params.back()].begin,
                     layout_.ranges[current.params.front()].end};
    current.counts = zero::counts_within(current.range, shards_);
    buckets_.push_back(std::move(current));
    current = Bucket();
  };
  for (size_t k = params_.size(); k-- > 0;) {
    bucket_of_[k] = buckets_.size();
    current.params.push_back(k);
    const double bytes = static_cast<double>(layout_.ranges[current.params.front()].end -
                                             layout_.ranges[k].begin) *
                         element_size(flat_dtype_);
    if (bytes >= cap_bytes) close();
  }
  close();
  for (Bucket& b : buckets_) b.pending = static_cast<int64_t>(b.params.size());
  param_ready_.assign(params_.size(), false);
}

void ZeroRedundancyOptimizer::on_grad_ready(size_t index) {
  // The first gradient of this backward: finish_backward runs once the whole backward is done,
  // after the last grad-ready hook.
  end_of_backward_.start();
  TS_CHECK(!param_ready_[index], "ZeroRedundancyOptimizer (stage 2): parameter ", index, " ('",
           params_[index].name(), "') received a second gradient in one backward after its "
           "bucket was reduced");
  copy_into_bucket(index);
  param_ready_[index] = true;
  if (--buckets_[bucket_of_[index]].pending == 0) launch_ready_buckets();
}

void ZeroRedundancyOptimizer::copy_into_bucket(size_t index) {
  Bucket& b = buckets_[bucket_of_[index]];
  if (!b.buffer.defined()) b.buffer = zeros({b.range.size()}, flat_options());
  const zero::Range& r = layout_.ranges[index];
  zero::move_grad_into(params_[index], b.buffer.narrow(0, r.begin - b.range.begin, r.size()));
}

void ZeroRedundancyOptimizer::launch_ready_buckets() {
  // Strictly in bucket order, so every rank issues the same collectives in the same sequence.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    b.reduced = empty({b.counts[group_->rank()]}, flat_options());
    std::optional<trace::CollectiveLabel> label;  // names the collective in a trace
    if (trace::recording()) {
      label.emplace("reduce_scatter bucket " + std::to_string(next_launch_), "reduce_scatter",
                    "\"bucket\":" + std::to_string(next_launch_) +
                        ",\"elements\":" + std::to_string(b.range.size()));
    }
    b.work = launch_reduce_scatter(b.buffer, b.reduced, b.counts);
    // Bound the memory in flight: the bucket launched two before this one is done by now (the
    // communication thread runs them in order), so wait for it and free it.
    if (next_launch_ >= 2) finish_bucket(buckets_[next_launch_ - 2]);
    ++next_launch_;
  }
}

void ZeroRedundancyOptimizer::finish_bucket(Bucket& b) {
  if (b.work == nullptr) return;
  b.work->wait();
  accumulate_shard_grad(zero::intersect(b.range, shards_[group_->rank()]), b.reduced);
  b.work = nullptr;
  b.buffer = Tensor();
  b.reduced = Tensor();
}

void ZeroRedundancyOptimizer::finish_backward() {
  NoGradGuard no_grad;
  // Parameters this backward did not reach contribute zeros; their buckets go out now, still in
  // bucket order.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_ready_[i]) continue;
    copy_into_bucket(i);
    --buckets_[bucket_of_[i]].pending;
  }
  launch_ready_buckets();
  for (Bucket& b : buckets_) {
    finish_bucket(b);
    b.pending = static_cast<int64_t>(b.params.size());
  }
  param_ready_.assign(params_.size(), false);
  next_launch_ = 0;
}

void ZeroRedundancyOptimizer::accumulate_shard_grad(const zero::Range& part, const Tensor& grad) {
  if (!shard_.grad().defined()) shard_.set_grad(zeros({shard_numel()}, flat_options()));
  if (part.empty()) return;
  Tensor slot = shard_.grad().narrow(0, part.begin - shard_offset(), part.size());
  add_(slot, grad);
}

// ---- Stage 1 and the step ---------------------------------------------------------------------

Tensor ZeroRedundancyOptimizer::flatten_grads() const {
  Tensor flat = zeros({layout_.total}, flat_options());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& g = params_[i].grad();
    const zero::Range& r = layout_.ranges[i];
    if (g.defined()) flat.narrow(0, r.begin, r.size()).copy_(g.reshape({-1}));
  }
  return flat;
}

std::shared_ptr<Work> ZeroRedundancyOptimizer::launch_reduce_scatter(
    const Tensor& flat, const Tensor& out, const std::vector<int64_t>& counts) {
  const DType wire = options_.reduce_dtype();
  if (wire == kF32 || flat_dtype_ != kF32) return comm_->reduce_scatter(flat, out, counts, ReduceOp::kMean);
  // Pre-divided so that the half-precision sum of N ranks stays in range.
  const double n = static_cast<double>(group_->size());
  const Tensor half = div(flat, n).to(wire);
  const Tensor part = empty({out.numel()}, TensorOptions(wire).device(device_));
  std::shared_ptr<Work> inner = comm_->reduce_scatter(half, part, counts, ReduceOp::kSum);
  return std::make_shared<ChainedWork>(inner, [out, part] { Tensor(out).copy_(part.to(kF32)); });
}

void ZeroRedundancyOptimizer::reduce_scatter_grads() {
  Tensor shard_grad = empty({shard_numel()}, flat_options());
  std::optional<trace::CollectiveLabel> label;  // names the collective in a trace
  if (trace::recording()) label.emplace("reduce_scatter gradients", "reduce_scatter");
  launch_reduce_scatter(flatten_grads(), shard_grad, sizes_of(shards_))->wait();
  shard_.set_grad(shard_grad);
  shard_grad_reduced_ = true;
}

void ZeroRedundancyOptimizer::scatter_into_params(const Tensor& flat) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const zero::Range& r = layout_.ranges[i];
    Tensor(params_[i].data()).copy_(flat.narrow(0, r.begin, r.size()).view(params_[i].shape()));
  }
}

void ZeroRedundancyOptimizer::copy_params_into(Tensor& shard, bool skip_masters) const {
  const zero::Range mine = shards_[group_->rank()];
  for (size_t i = 0; i < params_.size(); ++i) {
    const Variable& p = params_[i];
    if (skip_masters && is_half(p.dtype())) continue;  // f16/bf16: the shard is the master
    const zero::Range part = zero::intersect(mine, layout_.ranges[i]);
    if (part.empty()) continue;
    shard.narrow(0, part.begin - mine.begin, part.size())
        .copy_(p.data().reshape({-1}).narrow(0, part.begin - layout_.ranges[i].begin, part.size()));
  }
}

void ZeroRedundancyOptimizer::refresh_shard_from_params() {
  Tensor shard = shard_.data();
  copy_params_into(shard, shard_is_master_);
}

Tensor ZeroRedundancyOptimizer::master_shard() const {
  Tensor out = shard_.data().clone();
  copy_params_into(out, shard_is_master_);
  return out;
}

void ZeroRedundancyOptimizer::load_master_shard(const Tensor& values) {
  TS_CHECK(values.numel() == shard_numel(), "ZeroRedundancyOptimizer::load_master_shard: got ",
           values.numel(), " values for a shard of ", shard_numel());
  NoGradGuard no_grad;
  Tensor(shard_.data()).copy_(values.reshape({-1}));
  shard_is_master_ = true;
}

void ZeroRedundancyOptimizer::sync_inner_options() {
  inner_->param_groups()[0].options = param_groups()[0].options->clone();
}

void ZeroRedundancyOptimizer::step() {
  NoGradGuard no_grad;
  TS_CHECK(!end_of_backward_.in_backward(), "ZeroRedundancyOptimizer::step: called while a backward is running");
  refresh_shard_from_params();
  // 1. This rank's shard of the averaged gradient (stage 2 reduced it during backward).
  if (options_.stage() == 1 && !shard_grad_reduced_) reduce_scatter_grads();
  shard_grad_reduced_ = false;
  if (!shard_.grad().defined()) shard_.set_grad(zeros({shard_numel()}, flat_options()));
  // 2. The inner optimizer updates the shard (and only holds state for it).
  sync_inner_options();
  inner_->step();
  shard_is_master_ = true;
  // 3. Everyone gets every shard back.
  Tensor flat = empty({layout_.total}, flat_options());
  comm_->all_gather(shard_.data(), flat, sizes_of(shards_))->wait();
  scatter_into_params(flat);
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  for (const Variable& p : params_) p.zero_grad(set_to_none);
  shard_.zero_grad(set_to_none);
  shard_grad_reduced_ = false;
}

double ZeroRedundancyOptimizer::clip_grad_norm(double max_norm) {
  TS_CHECK(max_norm >= 0, "ZeroRedundancyOptimizer::clip_grad_norm: max_norm must be >= 0, got ",
           max_norm);
  NoGradGuard no_grad;
  // Stage 1 holds only local gradients until step(): reduce them now, so the norm is the
  // averaged gradient's, and step() uses the clipped shard instead of reducing again.
  if (options_.stage() == 1 && !shard_grad_reduced_) reduce_scatter_grads();
  // The shards are disjoint: sum their squares over the group (dist/grad_norm.h).
  return dist::clip_grad_norm({shard_}, {shard_}, max_norm, {group_});
}

double ZeroRedundancyOptimizer::clip_grad_norm(double max_norm, const std::vector<Variable>& counted,
                                               std::vector<std::shared_ptr<ProcessGroup>> other_groups) {
  TS_CHECK(max_norm >= 0, "ZeroRedundancyOptimizer::clip_grad_norm: max_norm must be >= 0, got ",
           max_norm);
  NoGradGuard no_grad;
  if (options_.stage() == 1 && !shard_grad_reduced_) reduce_scatter_grads();
  // This rank's shard of the averaged gradient, restricted to the counted parameters' elements.
  const zero::Range mine = shards_[group_->rank()];
  double local = 0;
  const Tensor& g = shard_.grad();
  for (size_t i = 0; i < params_.size() && g.defined(); ++i) {
    const bool counts = std::any_of(counted.begin(), counted.end(),
                                    [&](const Variable& c) { return c.is_same(params_[i]); });
    const zero::Range part = zero::intersect(mine, layout_.ranges[i]);
    if (!counts || part.empty()) continue;
    local += sum(square(g.narrow(0, part.begin - mine.begin, part.size()).to(kF64))).item();
  }
  std::vector<std::shared_ptr<ProcessGroup>> groups = {group_};
  groups.insert(groups.end(), other_groups.begin(), other_groups.end());
  const double total = std::sqrt(dist::sum_over(groups)(local));
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1 && g.defined()) {
    Tensor grad = g;
    mul_(grad, coef);
  }
  return total;
}

int64_t ZeroRedundancyOptimizer::state_bytes() const {
  // The inner optimizer's state for the shard, and the shard itself: the master weights this
  // rank steps (for f32 parameters a copy of its part of them).
  return inner_->state_bytes() + static_cast<int64_t>(shard_.data().nbytes());
}

// ---- Checkpoints: the consolidated (per-parameter) format -------------------------------------

StateDict ZeroRedundancyOptimizer::state_dict() const {
  const StateDict local = inner_->state_dict();
  StateDict full;
  save_param_groups(full);
  // Ranks that have not stepped yet have no state entries; all ranks step together, so the
  // presence of "state.0.step" is the same everywhere. The inner optimizer has one parameter,
  // the flat shard: parameter 0.
  const Tensor* step = local.find(optim::state_key(0, "step"));
  if (step == nullptr) return full;
  std::vector<std::string> names;
  for (const auto& [name, t] : local.with_prefix_removed(optim::state_key_prefix(0))) {
    if (name != "step") names.push_back(name);
  }
  const std::vector<int64_t> counts = sizes_of(shards_);
  std::vector<std::pair<std::string, Tensor>> gathered;
  for (const std::string& name : names) {
    Tensor flat = empty({layout_.total}, flat_options());
    group_->all_gather(local.at(optim::state_key(0, name)).to(flat_dtype_).contiguous(), flat, counts)->wait();
    gathered.emplace_back(name, flat);
  }
  Tensor master;
  const bool has_master = std::any_of(params_.begin(), params_.end(),
                                      [](const Variable& p) { return is_half(p.dtype()); });
  if (has_master) {
    master = empty({layout_.total}, TensorOptions(kF32).device(device_));
    group_->all_gather(shard_.data(), master, counts)->wait();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = optim::state_key_prefix(i);
    const zero::Range& r = layout_.ranges[i];
    full.set(prefix + "step", step->clone());
    for (const auto& [name, flat] : gathered) {
      full.set(prefix + name, flat.narrow(0, r.begin, r.size()).view(params_[i].shape()).clone());
    }
    if (is_half(params_[i].dtype())) {
      full.set(prefix + "master",
               master.narrow(0, r.begin, r.size()).view(params_[i].shape()).clone());
    }
  }
  return full;
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& full) {
  load_param_groups(full);
  StateDict local;
  for (const auto& [name, t] : full) {
    if (name.rfind("param_groups.", 0) == 0) local.set(name, t);
  }
  const std::string step_key = optim::state_key(0, "step");
  if (full.contains(step_key)) {
    local.set(step_key, full.at(step_key));
    std::vector<std::string> names;
    for (const auto& [name, t] : full.with_prefix_removed(optim::state_key_prefix(0))) {
      if (name != "step" && name != "master") names.push_back(name);
    }
    for (const std::string& name : names) {
      Tensor flat = empty({layout_.total}, flat_options());
      for (size_t i = 0; i < params_.size(); ++i) {
        const std::string key = optim::state_key(i, name);
        TS_CHECK(full.contains(key), "ZeroRedundancyOptimizer::load_state_dict: missing '", key, "'");
        const Tensor& t = full.at(key);
        TS_CHECK(t.numel() == params_[i].numel(), "ZeroRedundancyOptimizer::load_state_dict: '",
                 key, "' has shape ", t.shape(), " but parameter ", i, " has ", params_[i].shape());
        const zero::Range& r = layout_.ranges[i];
        flat.narrow(0, r.begin, r.size()).copy_(t.reshape({-1}));
      }
      local.set(optim::state_key(0, name), flat.narrow(0, shard_offset(), shard_numel()).clone());
    }
    // Masters are kept for f16/bf16 parameters only, wherever they sit (a model may start with
    // an f32 BatchNorm): look for any.
    bool has_master = false;
    for (size_t i = 0; i < params_.size() && !has_master; ++i) {
      has_master = full.contains(optim::state_key(i, "master"));
    }
    if (has_master) {
      Tensor flat = empty({layout_.total}, TensorOptions(kF32).device(device_));
      for (size_t i = 0; i < params_.size(); ++i) {
        const std::string key = optim::state_key(i, "master");
        const Tensor* t = full.find(key);
        TS_CHECK(t != nullptr || !is_half(params_[i].dtype()),
                 "ZeroRedundancyOptimizer::load_state_dict: '", key, "' is missing for ",
                 params_[i].dtype(), " parameter ", i, " ('", params_[i].name(),
                 "') though other parameters have their masters");
        const Tensor source = t != nullptr ? *t : params_[i].data();
        const zero::Range& r = layout_.ranges[i];
        flat.narrow(0, r.begin, r.size()).copy_(source.reshape({-1}));
      }
      load_master_shard(flat.narrow(0, shard_offset(), shard_numel()));
    } else {
      shard_is_master_ = false;  // no masters saved: the next step refreshes them from the parameters
    }
  }
  inner_->load_state_dict(local);
}

}  // namespace dist
}  // namespace tessera
