#include "dist/zero/zero_optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/grad_mode.h"
#include "dist/device_groups.h"
#include "dist/grad_norm.h"
#include "dist/module_sync.h"
#include "dist/trace_recorder.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Variable> params,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const OptimizerFactory& make_optimizer,
                                                 const ZeroOptions& options)
    : ZeroRedundancyOptimizer(
          params, {optim::ParamGroup(params)}, std::move(group),
          [make_optimizer](std::vector<optim::ParamGroup> groups) {
            return make_optimizer(std::move(groups[0].params));
          },
          options) {}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Variable> params,
                                                 std::vector<optim::ParamGroup> groups,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 const GroupedOptimizerFactory& make_optimizer,
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
  claim_ = GradReductionClaim(
      params_, "ZeroRedundancyOptimizer (stage " + std::to_string(options_.stage()) + ")",
      options_.stage() == 1
          ? "its gradient is this rank's own until step() reduce-scatters it: clip with "
            "ZeroRedundancyOptimizer::clip_grad_norm(max_norm), which reduces it first"
          : "its gradient lives in the optimizer's flat buckets: clip with "
            "ZeroRedundancyOptimizer::clip_grad_norm(max_norm)");
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
  // The inner optimizer steps the shard cut by the groups (checks that they hold each
  // parameter once, and that it is element-wise).
  inner_ = std::make_unique<zero::GroupedShardOptimizer>(
      std::vector<zero::FlatShard>{{shard_, params_, layout_, shards_[group_->rank()]}}, groups,
      make_optimizer, options_.offload());
  // The outer groups hold the full parameters and the options schedulers set; step() hands
  // the options to the inner optimizer. Its state is numbered in their order.
  for (const optim::ParamGroup& g : inner_->param_groups()) Optimizer::add_param_group(g);
  const std::vector<Variable> numbered = parameters();
  for (const Variable& p : params_) {
    state_index_.push_back(std::find_if(numbered.begin(), numbered.end(),
                                        [&](const Variable& q) { return q.is_same(p); }) -
                           numbered.begin());
  }

  if (options_.offload().any()) {
    release_shard_ = true;
    const bool has_master = std::any_of(params_.begin(), params_.end(),
                                        [](const Variable& p) { return is_half(p.dtype()); });
    if (has_master) {
      master_store_ = std::make_unique<offload::SwappedVector>(
          shard_numel(), flat_dtype_, device_, options_.offload(), "ZeroRedundancyOptimizer (offloaded)");
    }
    send_out_shard();  // nothing to keep yet: the first step refreshes it from the parameters
  }

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
          "flat vector; pass them all, and their groups, to the constructor)");
}

std::vector<Variable> ZeroRedundancyOptimizer::gradient_variables() const {
  if (options_.stage() == 1 && !shard_grad_reduced_) return params_;
  return {shard_};
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
  launch_reduce_scatter(flatten_grads(), shard_grad, zero::sizes(shards_))->wait();
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
  Tensor out;
  if (!release_shard_) {
    out = shard_.data().clone();
  } else if (master_store_ && shard_is_master_) {
    out = master_store_->read();
  } else {
    out = empty({shard_numel()}, flat_options());
  }
  copy_params_into(out, shard_is_master_);
  return out;
}

void ZeroRedundancyOptimizer::bring_in_shard() {
  if (!release_shard_) return;
  shard_.set_data(master_store_ && shard_is_master_ ? master_store_->read()
                                                    : empty({shard_numel()}, flat_options()));
}

void ZeroRedundancyOptimizer::send_out_shard() {
  if (!release_shard_) return;
  if (master_store_ && shard_is_master_) master_store_->write(shard_.data());
  // One element standing for the shard's shape (its gradient, reduced during backward, is
  // checked against it): the values are elsewhere until the next step brings them in.
  shard_.set_data(zeros({1}, flat_options()).expand({shard_numel()}));
}

void ZeroRedundancyOptimizer::load_master_shard(const Tensor& values) {
  TS_CHECK(values.numel() == shard_numel(), "ZeroRedundancyOptimizer::load_master_shard: got ",
           values.numel(), " values for a shard of ", shard_numel());
  NoGradGuard no_grad;
  shard_is_master_ = true;
  if (release_shard_) {
    if (master_store_) master_store_->write(values);  // f32 and f64 shards come from the parameters
    return;
  }
  Tensor(shard_.data()).copy_(values.reshape({-1}));
}

void ZeroRedundancyOptimizer::sync_inner_options() {
  for (size_t g = 0; g < param_groups().size(); ++g) {
    inner_->param_groups()[g].options = param_groups()[g].options->clone();
  }
}

void ZeroRedundancyOptimizer::step() {
  NoGradGuard no_grad;
  TS_CHECK(!end_of_backward_.in_backward(), "ZeroRedundancyOptimizer::step: called while a backward is running");
  bring_in_shard();
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
  comm_->all_gather(shard_.data(), flat, zero::sizes(shards_))->wait();
  scatter_into_params(flat);
  send_out_shard();
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
  // Offloaded, the shard is in memory only during step().
  return inner_->state_bytes() + (release_shard_ ? 0 : static_cast<int64_t>(shard_.data().nbytes()));
}

}  // namespace dist
}  // namespace tessera
