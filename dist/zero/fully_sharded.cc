#include "dist/zero/fully_sharded.h"

#include <algorithm>
#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "dist/grad_norm.h"
#include "dist/module_sync.h"
#include "dist/trace_recorder.h"
#include "dist/reduce_scalar.h"
#include "dist/zero/wrap_policy.h"
#include "optim/clip_grad.h"
#include "tensor/deferred_init.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<nn::Module> model,
                                                   std::shared_ptr<ProcessGroup> group,
                                                   const FullyShardedOptions& options)
    : model_(std::move(model)), group_(std::move(group)),
      reshard_after_forward_(options.reshard_after_forward()),
      prefetch_limit_(options.prefetch_limit()),
      mixed_precision_(options.mixed_precision()) {
  TS_CHECK(model_ != nullptr, "FullyShardedDataParallel: model is null");
  if (!options.auto_wrap_policy()) sequential_ = dynamic_cast<nn::Sequential*>(model_.get());
  TS_CHECK(group_ != nullptr, "FullyShardedDataParallel: group is null");
  TS_CHECK(options.min_num_params() >= 1, "FullyShardedDataParallel: min_num_params must be at "
           "least 1, got ", options.min_num_params());
  TS_CHECK(prefetch_limit_ >= 0, "FullyShardedDataParallel: prefetch_limit must be >= 0, got ",
           prefetch_limit_);
  TS_CHECK(!model_->parameters().empty(), "FullyShardedDataParallel: the model has no parameters");
  TS_CHECK(!options.wrap_layers() || options.units().empty(), "FullyShardedDataParallel: "
           "units() lists ", options.units().size(), " children and wrap_layers(true) makes every "
           "module with parameters a unit; choose one");
  claim_ = GradReductionClaim(model_->parameters(), "FullyShardedDataParallel",
                              "its gradient lives in its unit's flat shard: clip with "
                              "FullyShardedDataParallel::clip_grad_norm(max_norm)");
  options.offload().validate("FullyShardedDataParallel");
  // Every rank starts from rank 0's model, whatever each built. Parameters built under
  // DeferredInit (tensor/deferred_init.h) are materialized and broadcast unit by unit as they
  // are sharded, so the whole model is never in memory; the others are broadcast now.
  verify_same_parameters(*model_, *group_);
  std::vector<Variable> materialized;
  for (const Variable& p : model_->parameters()) {
    if (!is_deferred(p.data())) materialized.push_back(p);
  }
  const int64_t deferred = static_cast<int64_t>(model_->parameters().size() - materialized.size());
  const int64_t most = static_cast<int64_t>(
      all_reduce_scalar(static_cast<double>(deferred), *group_, ReduceOp::kMax));
  TS_CHECK(most == deferred, "FullyShardedDataParallel: rank ", group_->rank(), " built ",
           deferred, " parameters under DeferredInit, another rank ", most, ": build the model "
           "the same way on every rank");
  broadcast_parameters(materialized, *group_, 0);
  for (const Variable& b : model_->buffers()) materialize(b.data());
  broadcast_buffers(*model_, *group_, 0);
  build_units(options);
  reduced_.assign(units_.size(), false);
  started_.assign(units_.size(), 0.0);
  register_hooks();
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (size_t u = 0; u < units_.size(); ++u) {
    for (int handle : forward_hooks_[u]) unit_module_[u]->remove_forward_hook(handle);
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& params = units_[u]->params();
    for (size_t i = 0; i < params.size(); ++i) params[i].second.remove_hook(hook_handles_[u][i]);
  }
}

void FullyShardedDataParallel::build_units(const FullyShardedOptions& options) {
  std::vector<zero::UnitSpec> specs = sequential_ != nullptr ? zero::wrap_units(*sequential_, options)
                                                             : zero::wrap_module_units(*model_, options);
  unit_of_child_.assign(sequential_ != nullptr ? sequential_->size() : 0, -1);
  for (size_t u = 0; u < specs.size(); ++u) {
    if (specs[u].is_root) {
      root_ = static_cast<int>(u);
    } else if (!specs[u].children.empty()) {
      unit_of_child_[specs[u].children.front()] = static_cast<int>(u);  // one child each
    }
    unit_children_.push_back(specs[u].children);
    unit_module_.push_back(specs[u].module);
  }
  set_initial_orders(specs);
  flatten_units(std::move(specs), options.offload());
}

void FullyShardedDataParallel::set_initial_orders(const std::vector<zero::UnitSpec>& specs) {
  // Before any forward has run: forward by each unit's first module, backward by its last,
  // last first. The first training forward replaces both with the order it ran the units in.
  for (size_t u = 0; u < specs.size(); ++u) {
    forward_order_.push_back(u);
    backward_order_.push_back(u);
  }
  std::stable_sort(forward_order_.begin(), forward_order_.end(),
                   [&](size_t a, size_t b) { return specs[a].first < specs[b].first; });
  std::stable_sort(backward_order_.begin(), backward_order_.end(),
                   [&](size_t a, size_t b) { return specs[a].last > specs[b].last; });
}

void FullyShardedDataParallel::flatten_units(std::vector<zero::UnitSpec> specs,
                                             const Offload& offload) {
  // Under a half-precision param_dtype, the parameters Module::to(kBF16) would keep in f32
  // (BatchNorm's) compute in their own dtype.
  std::vector<const VariableImpl*> keep_f32;
  const std::optional<DType> low = mixed_precision_.param_dtype();
  if (low && is_half(*low)) {
    for (const auto& [path, module] : model_->named_modules()) {
      if (!module->keep_f32_under_half()) continue;
      for (const auto& [name, p] : module->named_parameters(/*recurse=*/false)) {
        keep_f32.push_back(p.impl());
      }
    }
  }
  const std::vector<std::shared_ptr<offload::ShardHome>> homes = make_homes(specs, offload);
  for (size_t u = 0; u < specs.size(); ++u) {
    std::vector<bool> keep;
    std::vector<Variable> deferred;
    for (const auto& [name, p] : specs[u].params) {
      keep.push_back(std::find(keep_f32.begin(), keep_f32.end(), p.impl()) != keep_f32.end());
      if (is_deferred(p.data())) deferred.push_back(p);
    }
    for (const Variable& p : deferred) materialize(p.data());
    broadcast_parameters(deferred, *group_, 0);
    units_.push_back(std::make_unique<FlatParameter>(
        std::move(specs[u].params), group_,
        specs[u].is_root ? std::string("root") : "unit" + std::to_string(u), mixed_precision_,
        std::move(keep)));
    if (homes[u] != nullptr) units_.back()->offload(homes[u]);
  }
}

std::vector<std::shared_ptr<offload::ShardHome>> FullyShardedDataParallel::make_homes(
    const std::vector<zero::UnitSpec>& specs, const Offload& offload) {
  std::vector<std::shared_ptr<offload::ShardHome>> homes(specs.size());
  if (!offload.shards()) return homes;
  const char* who = "FullyShardedDataParallel";
  const auto store = [&](OffloadTier tier, const char* name) -> std::shared_ptr<offload::OffloadStore> {
    if (tier == OffloadTier::kDevice) return nullptr;
    return offload::make_store(offload, tier, who, name, specs[0].params[0].second.device().is_cuda());
  };
  values_store_ = store(offload.params(), "parameter_shards");
  gradients_store_ = store(offload.gradients(), "gradient_shards");
  // Every unit's shard size is known from its parameters' shapes: reserve them all, then commit
  // (a full disk is an error now, before any unit is built). The writes of every unit join one
  // window, so the staging buffers behind the compute are a few shards.
  const auto writes = std::make_shared<offload::WriteBehind>();
  for (size_t u = 0; u < specs.size(); ++u) {
    int64_t numel = 0;
    for (const auto& [name, p] : specs[u].params) numel += p.numel();
    const DType dtype = specs[u].params[0].second.dtype() == kF64 ? kF64 : kF32;  // the master's
    homes[u] = std::make_shared<offload::ShardHome>(
        zero::padded_size(numel, group_->size()) / group_->size(), dtype,
        specs[u].params[0].second.device(), offload.piece_numel(), values_store_,
        gradients_store_, writes);
  }
  if (values_store_ != nullptr) values_store_->commit();
  if (gradients_store_ != nullptr) gradients_store_->commit();
  return homes;
}

void FullyShardedDataParallel::register_hooks() {
  forward_hooks_.resize(units_.size());
  for (size_t u = 0; u < units_.size(); ++u) {
    if (unit_module_[u] != nullptr) hook_nested_unit(u);
  }
  // Each parameter's gradient, once accumulated, counts toward its unit's reduce-scatter.
  for (size_t u = 0; u < units_.size(); ++u) {
    hook_handles_.emplace_back();
    const auto& params = units_[u]->params();
    for (size_t i = 0; i < params.size(); ++i) {
      hook_handles_[u].push_back(params[i].second.register_grad_ready_hook(
          [this, u, i](Variable&) { on_grad_ready(u, i); }));
    }
  }
}

std::vector<Variable> FullyShardedDataParallel::shard_parameters() const {
  std::vector<Variable> shards;
  for (const auto& unit : units_) shards.push_back(unit->shard());
  return shards;
}

std::vector<zero::FlatShard> FullyShardedDataParallel::flat_shards() const {
  std::vector<zero::FlatShard> shards;
  const int64_t r = group_->rank();
  for (const auto& unit : units_) {
    zero::FlatShard f;
    f.shard = unit->shard();
    for (const auto& [name, p] : unit->params()) f.params.push_back(p);
    f.layout = unit->layout();
    f.range = {r * unit->shard_numel(), (r + 1) * unit->shard_numel()};
    f.home = unit->home();
    shards.push_back(std::move(f));
  }
  return shards;
}

void FullyShardedDataParallel::hook_nested_unit(size_t u) {
  nn::Module* m = unit_module_[u];
  // Before the module's forward: its parameters whole (and the next units' gathers started).
  forward_hooks_[u].push_back(m->register_forward_pre_hook([this, u](nn::Module&) {
    start_unit_forward(u);
    if (trace::recording()) started_[u] = steady_seconds();
  }));
  // After it: as for a top-level unit, re-gather when the gradient of its output arrives, and
  // free the parameters now.
  forward_hooks_[u].push_back(m->register_forward_hook([this, u](nn::Module&, const Variable& out) {
    const bool recording = GradMode::is_enabled();
    record_compute(u, "forward ");
    if (recording && out.requires_grad()) {
      Variable(out).register_hook([this, u](Tensor&) { on_pre_backward(u); });
    }
    if (reshard_after_forward_ || !recording) units_[u]->reshard();
    return out;
  }));
}

Variable FullyShardedDataParallel::forward(const Variable& x) {
  TS_CHECK(!end_of_backward_.in_backward(), "FullyShardedDataParallel::forward: called while a backward is running");
  const bool recording = GradMode::is_enabled();
  executed_.clear();
  Variable h = x;
  const std::optional<DType> low = mixed_precision_.param_dtype();
  if (low && h.defined() && is_floating(h.dtype()) && h.dtype() != *low) h = tessera::to(h, *low);
  if (sequential_ == nullptr) {
    // The root (if any) is whole for the model's forward, the policy's units gathered and freed
    // by their hooks inside it.
    if (root_ >= 0) begin_unit_forward(static_cast<size_t>(root_));
    h = (*model_)(h);
    if (root_ >= 0) end_unit_forward(static_cast<size_t>(root_), h, recording);
  } else {
    // The root (if any) is whole from its first child to its last, the units of single
    // children inside that span gathered and freed around their own.
    const size_t root_first = root_ >= 0 ? unit_children_[root_].front() : 0;
    const size_t root_last = root_ >= 0 ? unit_children_[root_].back() : 0;
    for (size_t c = 0; c < sequential_->size(); ++c) {
      const bool in_root = root_ >= 0 && c >= root_first && c <= root_last;
      if (in_root && c == root_first) begin_unit_forward(static_cast<size_t>(root_));
      const int u = unit_of_child_[c];
      if (u >= 0) begin_unit_forward(static_cast<size_t>(u));
      h = (*(*sequential_)[c])(h);  // nested units' hooks run inside
      if (u >= 0) end_unit_forward(static_cast<size_t>(u), h, recording);
      if (in_root && c == root_last) end_unit_forward(static_cast<size_t>(root_), h, recording);
    }
  }
  // The order the units ran in is the order to prefetch in from now on: forward as recorded,
  // backward its reverse (FSDP's execution order). A model's forward may call its layers in
  // another order than it registered them, and backward runs the graph, not the registration.
  if (recording) {  // an evaluation forward (no graph) leaves the training order as it was
    forward_order_ = executed_;
    backward_order_.assign(executed_.rbegin(), executed_.rend());
  }
  return h;
}

void FullyShardedDataParallel::begin_unit_forward(size_t unit) {
  start_unit_forward(unit);
  if (trace::recording()) started_[unit] = steady_seconds();
}

void FullyShardedDataParallel::end_unit_forward(size_t unit, Variable& out, bool recording) {
  record_compute(unit, "forward ");
  // The unit's last child has run. When the gradient w.r.t. its output arrives, the unit's
  // backward is next: re-gather first.
  if (recording && out.requires_grad()) {
    out.register_hook([this, unit](Tensor&) { on_pre_backward(unit); });
  }
  if (reshard_after_forward_ || !recording) units_[unit]->reshard();
}

void FullyShardedDataParallel::start_unit_forward(size_t unit) {
  units_[unit]->gather();  // a no-op while the unit is still gathered; waits for a prefetch
  // A forward run again inside backward (activation checkpointing's recomputation) neither
  // records an order nor prefetches: the units after it in forward order already ran backward.
  if (end_of_backward_.in_backward()) return;
  if (std::find(executed_.begin(), executed_.end(), unit) == executed_.end()) {
    executed_.push_back(unit);
  }
  prefetch(forward_order_, unit);
}

void FullyShardedDataParallel::prefetch(const std::vector<size_t>& order, size_t unit) {
  // Every rank runs the same units in the same order, so these gathers are issued identically
  // everywhere; a unit already gathered (or gathering) is skipped, on every rank alike.
  const size_t at = std::find(order.begin(), order.end(), unit) - order.begin();
  if (at == order.size()) return;  // a unit the last forward did not run: no order to follow
  for (size_t k = 1; k <= static_cast<size_t>(prefetch_limit_) && at + k < order.size(); ++k) {
    units_[order[at + k]]->launch_gather();
  }
  // Offloaded values: the unit after those is read from its home now, so its gather finds its
  // shard in memory (ZeRO-Infinity's prefetch; a no-op without offload).
  const size_t next = at + static_cast<size_t>(prefetch_limit_) + 1;
  if (next < order.size()) units_[order[next]]->prefetch_values();
}

void FullyShardedDataParallel::on_pre_backward(size_t unit) {
  end_of_backward_.start();
  units_[unit]->gather();
  prefetch(backward_order_, unit);
  if (trace::recording()) started_[unit] = steady_seconds();
}

void FullyShardedDataParallel::record_compute(size_t unit, const char* what) const {
  if (!trace::recording()) return;
  trace::TraceRecorder::global().span(what + units_[unit]->name(), what[0] == 'f' ? "forward" : "backward",
                                      started_[unit], steady_seconds(),
                                      "\"unit\":\"" + units_[unit]->name() + "\"");
}

void FullyShardedDataParallel::on_grad_ready(size_t unit, size_t index) {
  end_of_backward_.start();
  if (!units_[unit]->grad_ready(index)) return;
  // Every parameter of the unit has its gradient, so every node that reads the unit's
  // parameters has run: reduce-scatter the gradients and free the full parameters. Units
  // complete in the same order on every rank (the same graph), so the collectives pair up.
  // The previous unit's reduce-scatter, issued earlier on the same communication thread, is
  // done or nearly: finish it so at most two gradient buffers are alive.
  record_compute(unit, "backward ");
  if (pending_ >= 0) units_[pending_]->finish_reduce_scatter();
  units_[unit]->launch_reduce_scatter();
  reduced_[unit] = true;
  pending_ = static_cast<int>(unit);
  units_[unit]->reshard();
}

void FullyShardedDataParallel::finish_backward() {
  NoGradGuard no_grad;
  // Units whose parameters did not all receive a gradient (unused in this forward) are
  // reduced now with zeros for the missing ones, in unit order on every rank.
  for (size_t u = 0; u < units_.size(); ++u) {
    if (reduced_[u]) continue;
    if (pending_ >= 0) units_[pending_]->finish_reduce_scatter();
    units_[u]->launch_reduce_scatter();
    pending_ = static_cast<int>(u);
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    units_[u]->finish_reduce_scatter();
    units_[u]->reshard();
  }
  reduced_.assign(units_.size(), false);
  pending_ = -1;
}

double FullyShardedDataParallel::clip_grad_norm(double max_norm) {
  TS_CHECK(max_norm >= 0, "FullyShardedDataParallel::clip_grad_norm: max_norm must be >= 0, got ",
           max_norm);
  // Every unit's shard is disjoint across the group (padding holds zeros), so the squares sum
  // over it; each unit's gradient is wherever its FlatParameter keeps it (offloaded: its home).
  NoGradGuard no_grad;
  const double total = std::sqrt(sum_over({group_})(local_grad_squared_sum()));
  const double coef = optim::clip_coefficient(max_norm, total);
  if (coef >= 1) return total;
  for (const auto& unit : units_) unit->scale_gradient(coef);
  return total;
}

void FullyShardedDataParallel::finish_offload_transfers() {
  for (const auto& unit : units_) {
    if (unit->home() != nullptr) unit->home()->finish_transfers();
  }
}

double FullyShardedDataParallel::local_grad_squared_sum() const {
  // In unit order, as optim::grad_squared_sum adds its parameters up.
  double local = 0;
  for (const auto& unit : units_) local += unit->gradient_squared_sum();
  return local;
}

StateDict FullyShardedDataParallel::state_dict() {
  TS_CHECK(!end_of_backward_.in_backward(), "FullyShardedDataParallel::state_dict: called during a backward");
  StateDict out;
  for (auto& unit : units_) unit->gather(GatherPrecision::kFull);
  for (const auto& [name, t] : model_->state_dict()) out.set(name, t.clone());
  for (auto& unit : units_) unit->reshard();
  return out;
}

void FullyShardedDataParallel::load_state_dict(const StateDict& state) {
  TS_CHECK(!end_of_backward_.in_backward(), "FullyShardedDataParallel::load_state_dict: called during a backward");
  for (auto& unit : units_) unit->gather(GatherPrecision::kFull);
  model_->load_state_dict(state);
  for (auto& unit : units_) {
    unit->update_shard_from_gathered();
    unit->reshard();
  }
}

}  // namespace dist
}  // namespace tessera
