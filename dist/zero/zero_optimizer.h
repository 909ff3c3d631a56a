// ZeRO stages 1 and 2 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", 2020) as an optim::Optimizer, so LR schedulers, checkpoints and the train
// tool treat it like any other optimizer.
//
// All parameters, in registration order, are laid end to end as one flat vector of psi
// elements and cut into N contiguous shards (dist/zero/partition.h); rank r owns shard r:
//
//   flat:    [ p0 ........ | p1 .... | p2 .............. | p3 .. ]
//   shards:  [ rank 0          | rank 1        | rank 2         ]   (a parameter may straddle)
//
// Each rank keeps an f32 copy of its shard (f64 for f64 models; the master weights for f16/bf16
// parameters) and wraps an ordinary ElementwiseOptimizer (SGD, Adam, AdamW) around it, so it
// holds optimizer state for psi / N elements only. Those optimizers update every element on its
// own, which is why stepping a shard gives exactly the values stepping whole parameters would.
//
// Stage 1 (optimizer state sharded). backward leaves each rank its local gradients; step() is
//   1. reduce-scatter the flat gradient: rank r receives the average of shard r   (N-1)/N psi
//   2. step the inner optimizer on the shard
//   3. all-gather the updated shards into every rank's parameters                 (N-1)/N psi
// the same 2 (N-1)/N psi elements sent per rank as DDP's all-reduce.
//
// Stage 2 (gradients sharded too). During backward, gradients are copied into buckets (reverse
// registration order, as DDP's; each bucket a contiguous range of the flat vector) and each
// parameter's own gradient is released at once. A full bucket is reduce-scattered while
// backward goes on; each rank adds the part falling in its shard to its shard's gradient, and
// the bucket's memory is freed once that is done (at most two buckets in flight):
//
//   backward:   grad p3 p2 -> bucket 0 [p2 p3] ── reduce-scatter ──> shard grads (rank r: its part)
//               grad p1 p0 -> bucket 1 [p0 p1] ── reduce-scatter ──>
//   post-backward callback: launch what is left, wait, free the buckets
//   step():     step the inner optimizer on the shard, all-gather the parameters
//
// so a rank holds psi / N gradient elements plus two buckets, not psi. Same bytes on the wire
// as stage 1. After a stage-2 backward the parameters have no .grad(); the averaged gradient of
// this rank's shard is shard_gradient(). Clip with clip_grad_norm(), which reduces the norm
// across the shards (stage 1 reduces its gradients there, before step()).
//
// Parameter groups (GPT-2's AdamW: the Linear weights decayed, the biases, LayerNorms and
// embeddings not): the flat vector stays one, in registration order, and this rank's shard is
// cut where the group changes into pieces that the inner optimizer steps under their group's
// options (dist/zero/grouped_shard_optimizer.h, which says why one vector rather than
// DeepSpeed's one per group). Every element still gets exactly its unsharded update. The
// groups, with their options, are this optimizer's param_groups(), so LR schedules treat it as
// the unsharded optimizer over the same groups, and its state is numbered as that optimizer
// numbers it: parameters in the groups' order, not the flat vector's.
//
// Offload (ZeroOptions::offload, dist/zero/offload/): the inner optimizer's state (Adam's moments)
// lives in host memory or on disk and is streamed through memory piece by piece at each step;
// the f32 shard is released between steps, brought back for the step (refreshed from the
// parameters, the masters of f16/bf16 parameters read back from the store) and written out
// after it, so between steps a rank holds neither its share of the state nor its master shard.
//
// The constructor checks that every rank holds the same parameter shapes and takes rank 0's
// values (as DDP does). state_dict() is collective: it gathers the state into the inner
// optimizer's per-parameter format, so a ZeRO checkpoint loads into a plain optimizer and back,
// at any world size (load_state_dict re-shards it).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "dist/grad_reduction_claim.h"
#include "dist/process_group.h"
#include "dist/work.h"
#include "dist/zero/flat_gradients.h"
#include "dist/zero/grouped_shard_optimizer.h"
#include "dist/zero/offload/offload.h"
#include "dist/zero/offload/swapped_vector.h"
#include "dist/zero/partition.h"
#include "optim/elementwise_optimizer.h"

namespace tessera {
namespace dist {

class ZeroOptions {
 public:
  // 1: optimizer state sharded; 2: gradients too.
  ZeroOptions& stage(int s) { stage_ = s; return *this; }
  // Stage 2's gradient bucket size.
  ZeroOptions& bucket_cap_mb(double mb) { bucket_cap_mb_ = mb; return *this; }
  // The collectives of CUDA parameters run over the device's group (NCCL in a CUDA build;
  // dist/device_groups.h) unless false (as DDP's option of that name).
  ZeroOptions& use_device_group(bool u) { use_device_group_ = u; return *this; }
  // The gradients' reduce-scatter in half precision (kF16 or kBF16; kF32, the default, is
  // uncompressed): each rank's flat gradient divided by N and rounded, summed in that dtype,
  // widened into the f32 shard gradient. Half the bytes of the f32 reduce-scatter, as DDP's
  // fp16 communication hook (dist/ddp/comm_hooks.h); the all-gather of parameters is unchanged.
  ZeroOptions& reduce_dtype(DType d) { reduce_dtype_ = d; return *this; }
  // Where the shard's optimizer state (Adam's moments) lives between steps: on the device (the
  // default), in host memory or on disk, streamed through memory piece by piece at each step
  // (ZeRO-Offload / ZeRO-Infinity; dist/zero/offload/offload.h). E.g.
  //   ZeroOptions().stage(2).offload(Offload().optimizer(OffloadTier::kDisk).dir("/nvme"))
  ZeroOptions& offload(const Offload& o) { offload_ = o; return *this; }
  int stage() const { return stage_; }
  const Offload& offload() const { return offload_; }
  DType reduce_dtype() const { return reduce_dtype_; }
  double bucket_cap_mb() const { return bucket_cap_mb_; }
  bool use_device_group() const { return use_device_group_; }

 private:
  int stage_ = 1;
  double bucket_cap_mb_ = 25;
  bool use_device_group_ = true;
  DType reduce_dtype_ = kF32;
  Offload offload_;
};

class ZeroRedundancyOptimizer : public optim::Optimizer {
 public:
  // Builds the inner optimizer around this rank's shard, e.g.
  //   [](std::vector<Variable> shard) { return std::make_unique<optim::Adam>(shard, opts); }
  // or zero_factory<optim::Adam>(opts).
  using OptimizerFactory =
      std::function<std::unique_ptr<optim::Optimizer>(std::vector<Variable> shard)>;
  // Builds the inner optimizer over groups of pieces of the shard, each with its group's options
  // (zero::grouped_factory<optim::AdamW>(defaults)).
  using GroupedOptimizerFactory = zero::GroupedOptimizerFactory;

  // One group: every parameter under the factory's options.
  ZeroRedundancyOptimizer(std::vector<Variable> params, std::shared_ptr<ProcessGroup> group,
                          const OptimizerFactory& make_optimizer,
                          const ZeroOptions& options = ZeroOptions());
  // Parameter groups: `params` in the flat vector's order (the model's registration order, so
  // that stage 2's buckets fill as backward runs), `groups` each parameter's options (every one
  // of `params` in exactly one group; null options: the inner optimizer's defaults).
  ZeroRedundancyOptimizer(std::vector<Variable> params, std::vector<optim::ParamGroup> groups,
                          std::shared_ptr<ProcessGroup> group,
                          const GroupedOptimizerFactory& make_optimizer,
                          const ZeroOptions& options = ZeroOptions());
  ~ZeroRedundancyOptimizer() override;

  // Averages gradients across the group (stage 1; stage 2 did during backward), steps the
  // shard and all-gathers every rank's parameters. Parameters without a gradient count as zero.
  void step() override;
  void zero_grad(bool set_to_none = true) override;
  // Collective: the full state in the unsharded optimizer's format, on every rank, its
  // parameters numbered in the groups' order (parameters()).
  StateDict state_dict() const override;
  // Loads a full (consolidated or unsharded) state dict, keeping this rank's shard.
  void load_state_dict(const StateDict& full) override;
  // Optimizer-state bytes held by this rank: the inner optimizer's state and the master shard,
  // ~1/N of an unsharded optimizer's (Adam on f16 parameters: 12 psi / N, the ZeRO paper's K).
  int64_t state_bytes() const override;
  // One flat vector, cut by the groups given to the constructor: further groups are an error.
  void add_param_group(optim::ParamGroup group) override;
  // Stage 1: the parameters (their local gradients, reduced in step()). Stage 2: the shard.
  std::vector<Variable> gradient_variables() const override;

  // Collective. Scales the gradients so that their global 2-norm is at most max_norm (the
  // norm is reduced across the shards); returns the norm before clipping.
  double clip_grad_norm(double max_norm);
  // The same inside a larger layout (3D: ZeRO replicas of tensor-parallel pipeline stages):
  // only the elements of `counted` parameters (tensor_parallel::norm_counted_parameters) add
  // their squares, summed over the shards (this group) and then over `other_groups` (the
  // tensor-parallel and pipeline groups).
  double clip_grad_norm(double max_norm, const std::vector<Variable>& counted,
                        std::vector<std::shared_ptr<ProcessGroup>> other_groups);
  // This rank's shard of the averaged gradient. Stage 2: after backward; stage 1: after
  // clip_grad_norm() or step().
  const Tensor& shard_gradient() const { return shard_.grad(); }

  int stage() const { return options_.stage(); }
  // The optimizer of this rank's shard: its state is "state.0.NAME" over the shard's elements.
  zero::GroupedShardOptimizer& inner() { return *inner_; }
  const zero::GroupedShardOptimizer& inner() const { return *inner_; }
  int64_t shard_offset() const { return shards_[group_->rank()].begin; }
  int64_t shard_numel() const { return shards_[group_->rank()].size(); }
  // The flat layout, for sharded checkpoints (dist/zero/sharded_checkpoint.h): the parameters
  // in flat order, where each starts, every rank's shard, and this rank's f32 (f64) shard.
  const std::vector<Variable>& params() const { return params_; }
  const zero::FlatLayout& layout() const { return layout_; }
  const std::vector<zero::Range>& shards() const { return shards_; }
  const Variable& shard() const { return shard_; }
  ProcessGroup& group() const { return *group_; }
  // This rank's shard of the master values, as a checkpoint saves them: the f32 shard where it
  // is the master (f16/bf16 parameters once stepped or loaded), the parameters' values elsewhere.
  Tensor master_shard() const;
  // Loads this rank's shard of master values (a sharded checkpoint): the shard becomes the
  // master of f16/bf16 parameters, so the next step() does not overwrite it with their rounding.
  void load_master_shard(const Tensor& values);
  // Offloaded with f16/bf16 parameters: the store of their masters (read and written once a
  // step); null otherwise.
  const offload::SwappedVector* offloaded_master() const { return master_store_.get(); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices, in flat order
    zero::Range range;           // its elements in the flat vector
    std::vector<int64_t> counts;  // reduce-scatter counts: its part in each rank's shard
    Tensor buffer;               // allocated at its first gradient, freed once reduced
    Tensor reduced;              // this rank's part of the average, while in flight
    int64_t pending = 0;
    std::shared_ptr<Work> work;
  };
  void build_buckets();
  void on_grad_ready(size_t index);
  void copy_into_bucket(size_t index);
  void launch_ready_buckets();
  void finish_bucket(Bucket& bucket);
  void finish_backward();
  Tensor flatten_grads() const;
  void reduce_scatter_grads();
  void scatter_into_params(const Tensor& flat);
  void sync_inner_options();
  void refresh_shard_from_params();
  void copy_params_into(Tensor& shard, bool skip_masters) const;
  void accumulate_shard_grad(const zero::Range& part, const Tensor& grad);
  // Offloaded: the shard back in memory for a step (masters from the store), and out again.
  void bring_in_shard();
  void send_out_shard();
  // Starts the reduce-scatter of `flat` (this rank's f32 gradients) into `out` (f32), in
  // options_.reduce_dtype(); the Work's completion leaves the average in `out`.
  std::shared_ptr<Work> launch_reduce_scatter(const Tensor& flat, const Tensor& out,
                                              const std::vector<int64_t>& counts);
  TensorOptions flat_options() const { return TensorOptions(flat_dtype_).device(device_); }

  std::vector<Variable> params_;
  std::shared_ptr<ProcessGroup> group_;  // the given group: set-up and checkpoints
  std::shared_ptr<ProcessGroup> comm_;   // the step's collectives (group_for_device)
  ZeroOptions options_;
  GradReductionClaim claim_;
  zero::FlatLayout layout_;
  std::vector<zero::Range> shards_;
  DType flat_dtype_ = kF32;  // f64 when every parameter is f64, else f32
  Device device_;            // the parameters' device: the shard lives there too
  Variable shard_;           // f32 master copy of this rank's shard; .grad() its gradient
  bool shard_grad_reduced_ = false;  // stage 1: clip_grad_norm already reduced this step's
  std::unique_ptr<zero::GroupedShardOptimizer> inner_;
  std::vector<int64_t> state_index_;  // per parameter (flat order): its number in state_dict()

  // Stage 2.
  std::vector<int> hook_handles_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> param_ready_;
  size_t next_launch_ = 0;
  // f16/bf16 parameters: until the shard holds master weights of its own (after a step, or
  // loaded with the state), it is refreshed from the parameters like an f32 shard, so parameters
  // loaded after construction (a checkpoint without optimizer state) are not overwritten.
  bool shard_is_master_ = false;
  // Offloaded: the shard is released between steps; the masters of f16/bf16 parameters are kept
  // in master_store_ (null when every parameter is f32 or f64: the parameters refresh it).
  bool release_shard_ = false;
  std::unique_ptr<offload::SwappedVector> master_store_;
  // Queued by a backward's first gradient: finish_backward.
  zero::EndOfBackward end_of_backward_{[this] { finish_backward(); }};
};

// A factory for ZeroRedundancyOptimizer: the inner optimizer of type Opt with these options.
template <typename Opt, typename Options>
ZeroRedundancyOptimizer::OptimizerFactory zero_factory(const Options& options) {
  return [options](std::vector<Variable> shard) {
    return std::make_unique<Opt>(std::move(shard), options);
  };
}

}  // namespace dist
}  // namespace tessera
