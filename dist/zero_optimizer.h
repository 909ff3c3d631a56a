// ZeRO stage 1 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", 2020): optimizer state partitioned across the data-parallel group.
//
// All parameters, in registration order, are laid end to end as one flat vector of psi
// elements and cut into N contiguous shards of (almost) equal size; rank r owns shard r:
//
//   flat:    [ p0 ........ | p1 .... | p2 .............. | p3 .. ]
//   shards:  [ rank 0          | rank 1        | rank 2         ]   (a parameter may straddle)
//
// Each rank keeps an f32 copy of its shard (f64 for f64 models; the master weights for f16/bf16
// parameters) and wraps an ordinary
// optimizer around it, so it holds optimizer state (Adam's two moments) for psi / N elements
// only. SGD, Adam and AdamW update every element independently, which is why stepping a shard
// gives exactly the values stepping whole parameters would. A step is:
//
//   1. reduce-scatter the flat gradient: rank r receives the average of shard r   (N-1)/N psi
//   2. step the wrapped optimizer on the shard
//   3. all-gather the updated shards into every rank's parameters                 (N-1)/N psi
//
// the same 2 (N-1)/N psi bytes per rank as DDP's all-reduce. consolidated_state_dict() gathers
// the state into the per-parameter format of the wrapped optimizer, so a ZeRO checkpoint loads
// into a plain optimizer and back (load_state_dict re-shards it).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "optim/optimizer.h"

namespace tessera {
namespace dist {

class ZeroRedundancyOptimizer {
 public:
  // Builds the wrapped optimizer around this rank's shard, e.g.
  //   [](std::vector<Variable> shard) { return std::make_unique<optim::Adam>(shard, opts); }
  using OptimizerFactory =
      std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable> shard)>;

  // The step's reduce-scatter and all-gather of CUDA parameters run over the device's group
  // (NCCL in a CUDA build; dist/device_groups.h) unless use_device_group is false (as DDP's
  // option of that name).
  ZeroRedundancyOptimizer(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                          const OptimizerFactory& make_optimizer, bool use_device_group = true);

  // Averages gradients across the group and updates every rank's parameters. Parameters
  // without a gradient count as zero gradient.
  void step();
  void zero_grad(bool set_to_none = true);

  // The wrapped optimizer (its param_groups carry the learning rate for schedulers).
  optim::Optimizer& inner() { return *inner_; }
  // Optimizer-state bytes held by this rank: ~1/N of an unsharded optimizer's.
  int64_t state_bytes() const;
  int64_t shard_offset() const { return offsets_[group_->rank()]; }
  int64_t shard_numel() const { return counts_[group_->rank()]; }

  // Collective. The full state in the wrapped optimizer's format ("param_groups.0.lr",
  // "state.I.exp_avg" with parameter I's shape, ...), on every rank.
  StateDict consolidated_state_dict();
  // Loads a full (consolidated or unsharded) state dict, keeping this rank's shard.
  void load_state_dict(const StateDict& full);

 private:
  Tensor flatten_grads() const;
  void scatter_into_params(const Tensor& flat);
  // Copies parameters that hold full precision (f32/f64) into the shard, so changes made to
  // them outside the optimizer (loading a checkpoint) are what the next step starts from.
  void refresh_shard_from_params();

  std::vector<Variable> params_;
  std::shared_ptr<ProcessGroup> group_;  // the given group: checkpoints
  std::shared_ptr<ProcessGroup> comm_;   // the step's collectives (group_for_device)
  std::vector<int64_t> param_offsets_;   // where each parameter starts in the flat vector
  int64_t total_ = 0;
  DType flat_dtype_ = kF32;                // f64 when every parameter is f64, else f32
  Device device_;                          // the parameters' device: the shard lives there too
  TensorOptions flat_options() const { return TensorOptions(flat_dtype_).device(device_); }
  std::vector<int64_t> counts_, offsets_;  // shard sizes and starts, by rank
  Variable shard_;                         // f32 master copy of this rank's shard
  std::unique_ptr<optim::Optimizer> inner_;
};

}  // namespace dist
}  // namespace tessera
