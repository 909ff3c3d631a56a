// FullyShardedDataParallel: ZeRO stage 3 (Rajbhandari et al. 2020; FairScale/PyTorch FSDP).
// Parameters, gradients and optimizer state are all sharded: each rank holds ~1/N of each.
//
// The model is an nn::Sequential whose children are grouped into units. Each unit's parameters
// become one FlatParameter (dist/zero/flat_parameter.h), sharded across the N ranks; the
// parameters of children that are not units form the root unit. A unit is whole only while it
// runs:
//
//   model:    [ unit 0: Linear ] ReLU [ unit 1: Linear ] ReLU [ root: Linear ]
//   at rest:  rank r holds shard r of every unit            sum_u S_u = ~psi / N elements
//
//   forward   gather u0 ─ u0.forward ─ reshard u0 ─ gather u1 ─ u1.forward ─ reshard u1 ─ ...
//                                       (each unit's output gets a pre-backward hook)
//   backward  ... hook(u1's output): gather u1 ─ u1's backward ─ grads ready: reduce-scatter,
//                                                                reshard u1
//             hook(u0's output): gather u0 ─ u0's backward ─ grads ready: reduce-scatter,
//                                                                reshard u0
//             post-backward callback: reduce what is left (unused parameters count as zero),
//                                     wait for every reduce-scatter, reshard everything
//   step      an ordinary optimizer on shard_parameters(): no communication
//
// Per step each rank sends, for every unit of padded size P_u, (N-1)/N P_u elements in each of
// the forward all-gather, the backward all-gather and the reduce-scatter: 3 (N-1)/N psi in all,
// 1.5 times DDP's all-reduce (2 (N-1)/N psi).
//
// A parameter used by modules of two units (a tied weight: GPT-2's lm_head reads the token
// embedding's, nn::Module::register_tied_parameter) is in neither: it goes to the root unit,
// which then spans every child that uses it, so it is whole from the first use's forward to the
// last use's backward (FSDP puts a shared parameter in the unit enclosing its users; wrap_policy.h).
// Autograd sums its gradient over both uses before its grad-ready hook, so it is
// reduce-scattered once, with the root's:
//
//   forward   gather root ─ gather u0 ─ embed ─ reshard u0 ─ ... blocks ... ─ lm_head ─ reshard root
//   backward  hook(lm_head's output): gather root ─ ... blocks ... ─ embed's backward ─ wte's
//             gradient (projection + lookup rows) ready: reduce-scatter root, reshard root
//
// With wrap_layers, units may sit inside a child (each convolution and batch norm of a ResNet
// block): forward hooks on the unit's module gather it before its forward and reshard it after,
// registering the same pre-backward hook on its output, so the picture above holds one layer
// at a time.
//
// Every rank must run the same units in the same order (the collectives pair up across ranks),
// which a data-parallel replica does. At most one unit's gathered parameters are held at a time
// in forward (plus the root's while it is running, if its children are spread out), and in
// backward one unit gathered plus one unit's gradient buffer in flight. With prefetch_limit(k)
// the next k units' all-gathers (in forward order, or in backward order from the pre-backward
// hook) are launched when a unit starts, so communication overlaps computation and at most
// 1 + k units are gathered at once. The orders are the execution order each forward records
// (backward: its reverse), as FSDP's, not the registration order: a block may register its
// layers in one order and call them in another.
//
//   comm:     [gather u0][gather u1]     [gather u2]
//   compute:             [ u0 forward ][ u1 forward ][ u2 forward ]
//
// While a trace records (dist/trace_recorder.h), each unit's forward and backward computation
// are spans on the compute track ("forward unit0", from its parameters whole to its output;
// "backward unit0", from its re-gather to its last gradient), beside FlatParameter's gathers,
// frees and reduce-scatters.
//
// Any other Module (a model of the user's own, whose forward calls its layers as it likes) is
// wrapped by an auto-wrap policy (FullyShardedOptions::auto_wrap_policy; wrap_policy.h): every
// unit is then a module gathered and freed by its forward hooks, as wrap_layers' are, and the
// model's own module is the root, whole for the model's whole forward:
//
//   struct Net : nn::Module { ... };            // layers registered, forward of its own
//   FullyShardedDataParallel fsdp(std::make_shared<Net>(), dist::world(),
//                                 FullyShardedOptions().auto_wrap_policy(module_wrap_policy<Block>()));
//   optim::AdamW opt(fsdp.shard_parameters(), optim::AdamOptions(1e-3));
//   cross_entropy(fsdp(x), y).backward();  opt.step();
//
// Buffers (BatchNorm statistics) are not sharded: rank 0's are broadcast at construction and
// each rank updates its own afterwards, as with ZeRO-1/2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/grad_reduction_claim.h"
#include "dist/process_group.h"
#include "dist/zero/flat_gradients.h"
#include "dist/zero/flat_parameter.h"
#include "dist/zero/fully_sharded_options.h"
#include "dist/zero/grouped_shard_optimizer.h"
#include "dist/zero/mixed_precision.h"
#include "nn/sequential.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace dist {

namespace zero {
struct UnitSpec;  // wrap_policy.h
}  // namespace zero

class FullyShardedDataParallel {
 public:
  // Collective. Checks that every rank holds the same parameter names and shapes, takes rank
  // 0's parameters and buffers, and shards every unit: afterwards the model's parameters are
  // empty outside forward and backward, and stay empty when the wrapper is destroyed (keep
  // state_dict() to load into an unwrapped model).
  // A Sequential is run child by child (its units are children, or layers with wrap_layers);
  // any other Module, or a Sequential given an auto_wrap_policy, by its own forward, with the
  // policy's units (wrap_policy.h).
  FullyShardedDataParallel(std::shared_ptr<nn::Module> model,
                           std::shared_ptr<ProcessGroup> group,
                           const FullyShardedOptions& options = FullyShardedOptions());
  ~FullyShardedDataParallel();
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  // Collective. Runs the model (a Sequential's children in order), each unit gathered around
  // its own forward.
  Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }
  Variable operator()(const Tensor& x) { return forward(Variable(x)); }

  // The flat shards, one Variable per unit (units in child order, the root last): give them
  // to an ordinary optimizer, e.g. optim::SGD opt(fsdp.shard_parameters(), SGDOptions(0.1)).
  // After backward, each one's grad() is this rank's part of the averaged gradient.
  std::vector<Variable> shard_parameters() const;
  // The same shards with the parameters each unit's flat vector holds, for an optimizer with
  // parameter groups (GPT-2's AdamW decaying its Linear weights only), which cuts them by group:
  //   zero::GroupedShardOptimizer opt(fsdp.flat_shards(), groups,
  //                                   zero::grouped_factory<optim::AdamW>(AdamOptions(lr)));
  std::vector<zero::FlatShard> flat_shards() const;

  // Collective. Scales the shards' gradients so that the global 2-norm of the averaged
  // gradient is at most max_norm (the squared norms of the shards are summed across the group;
  // padding holds zeros); returns the norm before clipping. Call after backward, before step().
  double clip_grad_norm(double max_norm);
  // This rank's part of the squared gradient norm: its shards' gradients' sums of squares, in
  // memory or kept by their homes when offloaded (no read). inf or NaN when a gradient is.
  double local_grad_squared_sum() const;

  // Collective. The full model's parameters and buffers under the model's own names (copies),
  // so a checkpoint loads into the unwrapped model.
  StateDict state_dict();
  // Collective. Loads a full state dict (the unwrapped model's) into the shards and buffers.
  void load_state_dict(const StateDict& state);

  const std::vector<std::unique_ptr<FlatParameter>>& units() const { return units_; }
  // The children of each unit, by position; the root's (if any) last, which include the
  // children using its shared parameters (wrap_policy.h). Empty for a unit nested inside a
  // child (wrap_layers): unit_module() names its module.
  const std::vector<std::vector<size_t>>& unit_children() const { return unit_children_; }
  // The module a nested unit wraps (wrap_layers, an auto_wrap_policy), or nullptr for a unit of
  // top-level children and for the root.
  const nn::Module* unit_module(size_t unit) const { return unit_module_[unit]; }
  nn::Module& module() { return *model_; }
  // Offloaded: waits for the transfers still in flight (the last step's write-behind, a
  // prefetch), releasing their staging buffers: what stays resident at rest is then measurable.
  void finish_offload_transfers();
  // The stores of offloaded parameter and gradient shards (FullyShardedOptions::offload), with
  // their bytes reserved, read and written; null for a kind kept in memory.
  const offload::OffloadStore* parameter_store() const { return values_store_.get(); }
  const offload::OffloadStore* gradient_store() const { return gradients_store_.get(); }
  ProcessGroup& group() { return *group_; }

 private:
  // Construction, in order: the wrap policy's units (wrap_policy.h) and the prefetch orders
  // before any forward; each unit's parameters flattened into its FlatParameter; the hooks.
  void build_units(const FullyShardedOptions& options);
  void set_initial_orders(const std::vector<zero::UnitSpec>& specs);
  void flatten_units(std::vector<zero::UnitSpec> specs, const Offload& offload);
  // Offloaded parameters or gradients: one store per tier, every unit's home reserved in it and
  // the stores committed (null homes without offload).
  std::vector<std::shared_ptr<offload::ShardHome>> make_homes(
      const std::vector<zero::UnitSpec>& specs, const Offload& offload);
  void register_hooks();
  void hook_nested_unit(size_t unit);
  // A top-level unit's forward (the root's spans several children): gathered before its first
  // child, and after its last given the pre-backward hook on `out` and freed.
  void begin_unit_forward(size_t unit);
  void end_unit_forward(size_t unit, Variable& out, bool recording);
  void start_unit_forward(size_t unit);
  void prefetch(const std::vector<size_t>& order, size_t unit);
  void on_pre_backward(size_t unit);
  void on_grad_ready(size_t unit, size_t index);
  void finish_backward();
  // While a trace records: the span "forward unitK" / "backward unitK" since started_[unit].
  void record_compute(size_t unit, const char* what) const;

  std::shared_ptr<nn::Module> model_;
  // The model run child by child, or null: run by its own forward (an auto-wrap policy's units).
  nn::Sequential* sequential_ = nullptr;
  std::shared_ptr<ProcessGroup> group_;
  bool reshard_after_forward_ = true;
  int prefetch_limit_ = 0;
  MixedPrecision mixed_precision_;
  GradReductionClaim claim_;
  std::shared_ptr<offload::OffloadStore> values_store_;     // offloaded parameters, or null
  std::shared_ptr<offload::OffloadStore> gradients_store_;  // offloaded gradients, or null
  std::vector<std::unique_ptr<FlatParameter>> units_;
  std::vector<std::vector<size_t>> unit_children_;
  std::vector<nn::Module*> unit_module_;            // per unit: its nested module, or nullptr
  std::vector<std::vector<int>> forward_hooks_;     // per unit: the nested module's hooks
  std::vector<int> unit_of_child_;  // the unit of this child alone (not the root), or -1
  int root_ = -1;                   // the root unit, if any
  // The prefetch orders: before the first forward, units by their first child (backward: by
  // their last child, last first); afterwards, the order the last forward ran them in (and its
  // reverse), recorded in executed_.
  std::vector<size_t> forward_order_;
  std::vector<size_t> backward_order_;
  std::vector<size_t> executed_;
  std::vector<std::vector<int>> hook_handles_;  // per unit, per parameter
  std::vector<bool> reduced_;                   // per unit, in the current backward
  std::vector<double> started_;  // per unit: when its forward or backward computation began
  int pending_ = -1;  // the unit whose reduce-scatter is in flight during backward
  // Queued by a backward's first pre-backward or grad-ready hook: finish_backward, which runs
  // once the engine has walked the whole graph, after the last grad-ready hook.
  zero::EndOfBackward end_of_backward_{[this] { finish_backward(); }};
};

}  // namespace dist
}  // namespace tessera
