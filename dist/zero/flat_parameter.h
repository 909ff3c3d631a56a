// FlatParameter: one ZeRO-3 unit's parameters as a single flat, padded buffer, sharded across
// the data-parallel group (the flat parameter of FairScale/PyTorch FSDP).
//
// The unit's parameters, in registration order, are laid end to end and the flat vector is
// padded up to a multiple of N (dist/zero/partition.h: padded_size), so every rank owns one
// shard of the same size S = padded / N and the collectives need no ragged counts:
//
//   parameters:  w0 (6)          b0 (3)     w1 (4)
//   flat:        [0 1 2 3 4 5 | 6 7 8 | 9 10 11 12] + pad        13 -> 16 = 4 x 4
//   shards:      [rank 0: 0-3 | rank 1: 4-7 | rank 2: 8-11 | rank 3: 12 pad pad pad]
//
// Between uses only the shard exists (the master copy the optimizer steps, f32, or f64 for f64
// models); every original parameter Variable points at an empty tensor, so the full values are
// really freed (memory_stats shows it):
//
//   sharded:   rank r holds shard r                              S elements
//   gather():  all-gather the shards -> full flat buffer         (N-1) S elements sent per rank
//              each parameter set_data()s to its view of it      padded elements held
//   reshard(): parameters point to empty tensors, the buffer is freed
//
// launch_gather() starts the all-gather without waiting (a prefetch: the communication thread
// fills the buffer while the previous unit computes); gather() then only waits.
//
// Autograd nodes save the parameter Variables, not their tensors, so a backward that runs after
// a re-gather reads the re-gathered values.
//
// Mixed precision (dist/zero/mixed_precision.h): the shard stays the f32 master; gather() casts
// it to param_dtype before the all-gather and the parameters compute in that dtype (those marked
// keep_dtype in theirs); gradients are averaged in reduce_dtype. gather(kFull) gathers the
// master values in the parameters' own dtype instead (state dicts, loading).
//
// Gradients: as each parameter's gradient arrives (grad_ready), it is copied into a flat, padded
// gradient buffer and the parameter's own gradient is released. Once every parameter has
// reported (or at the end of backward, with zeros for those that did not), the buffer is
// reduce-scattered with averaging, (N-1) S elements sent per rank, and this rank's part is
// added to the shard's gradient, so gradients accumulate across backward calls until the
// optimizer's zero_grad().
//
// Offloaded (offload(home); dist/zero/offload/shard_home.h), the shard's values and gradient live
// in the home's stores between uses: a gather reads the values first, the reduce-scatter writes
// (or adds to) the gradient there, and the shard Variable stays empty; the optimizer brings a
// unit's shard in for its step (zero::GroupedShardOptimizer, through FlatShard::home).
//
// While a trace records (dist/trace_recorder.h), the communication thread records each
// "all_gather NAME" and "reduce_scatter NAME", and reshard() marks "free NAME" on the compute
// track (args: the unit's name and padded elements).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "dist/process_group.h"
#include "dist/work.h"
#include "dist/zero/mixed_precision.h"
#include "dist/zero/offload/shard_home.h"
#include "dist/zero/partition.h"

namespace tessera {
namespace dist {

// What a gather produces: the dtypes the unit computes in (mixed precision's param_dtype), or
// the master values in the parameters' own dtype.
enum class GatherPrecision { kCompute, kFull };

class FlatParameter {
 public:
  // `params` (name, parameter) hold the full values, identical on every rank, and share one
  // dtype and device. Keeps this rank's shard and reshards: afterwards the parameters are empty
  // until gather(). With `precision` enabled, the parameters compute in its param_dtype except
  // those whose keep_dtype entry is true (empty: none kept).
  FlatParameter(std::vector<std::pair<std::string, Variable>> params,
                std::shared_ptr<ProcessGroup> group, std::string name,
                const MixedPrecision& precision = MixedPrecision(),
                std::vector<bool> keep_dtype = {});
  FlatParameter(const FlatParameter&) = delete;
  FlatParameter& operator=(const FlatParameter&) = delete;

  // Collective: all-gathers the full flat buffer and points every parameter at its view (or,
  // for a parameter computing in another dtype than the buffer's, at a cast of it). A no-op
  // when already gathered with this precision; finishes a gather launch_gather() started.
  void gather(GatherPrecision precision = GatherPrecision::kCompute);
  // Collective, asynchronous: starts the all-gather in the compute dtype (a prefetch); gather()
  // finishes it. A no-op when gathered or gathering.
  void launch_gather();
  // Frees the full buffer; parameters point to empty tensors. A no-op when already sharded;
  // waits for a gather in flight first (the communication thread is writing the buffer).
  void reshard();
  // The parameters hold their full values.
  bool gathered() const { return full_.defined() && gather_work_ == nullptr; }
  // A launched gather has not been finished by gather() yet.
  bool gathering() const { return gather_work_ != nullptr; }
  // While gathered with kFull: copies this rank's part of the (changed) full values back into
  // the shard, after a state dict was loaded into the parameters.
  void update_shard_from_gathered();

  // Backward. grad_ready(i) moves parameter i's gradient into the flat gradient buffer and
  // returns true once every parameter of the unit has reported in this backward.
  bool grad_ready(size_t index);
  // Collective, asynchronous: reduce-scatters (averages) the flat gradient buffer; parameters
  // that did not report count as zero.
  void launch_reduce_scatter();
  // Waits for the reduce-scatter and adds this rank's part to shard().grad(). A no-op when none
  // is in flight.
  void finish_reduce_scatter();
  bool reduce_scatter_pending() const { return work_ != nullptr; }
  // The shard's gradient's sum of squares (optim::squared_sum; 0 without one), kept by the home
  // when offloaded (no read), and the gradient scaled by `factor` wherever it lives (clipping).
  double gradient_squared_sum() const;
  void scale_gradient(double factor);

  // This rank's shard of the flat parameter: the Variable the optimizer steps (empty at rest
  // when offloaded).
  const Variable& shard() const { return shard_; }
  // Moves the shard's values and gradient into `home`'s stores (those it offloads); from now on
  // they live there between uses. Once, right after construction.
  void offload(std::shared_ptr<offload::ShardHome> home);
  // Offloaded values: posts their read now (dist/zero/offload/shard_home.h), for a gather soon
  // after; a no-op otherwise, or while gathered.
  void prefetch_values();
  // The home of an offloaded shard, or null.
  const std::shared_ptr<offload::ShardHome>& home() const { return home_; }
  // The shard's values wherever they live (a read from the home when offloaded), and a write of
  // new ones.
  Tensor shard_values() const;
  void set_shard_values(const Tensor& values);
  const std::vector<std::pair<std::string, Variable>>& params() const { return params_; }
  const std::string& name() const { return name_; }
  int64_t numel() const { return layout_.total; }  // without padding
  int64_t padded_numel() const { return padded_; }
  int64_t shard_numel() const { return padded_ / group_->size(); }
  DType dtype() const { return dtype_; }
  // Mixed precision: the dtype the unit's all-gather carries, each parameter's compute dtype,
  // and the dtype gradients are averaged in (all dtype() without it).
  DType gather_dtype() const { return gather_dtype_; }
  const std::vector<DType>& compute_dtypes() const { return compute_dtypes_; }
  DType reduce_dtype() const { return reduce_dtype_; }
  // The parameters' shapes and where each starts in the flat vector (the parameters themselves
  // are empty between gathers).
  const std::vector<Shape>& shapes() const { return shapes_; }
  const zero::FlatLayout& layout() const { return layout_; }

 private:
  std::vector<int64_t> counts() const;
  std::string trace_args() const;  // "unit" and "elements", for a trace's events
  void launch_gather_in(DType dtype);

  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<Shape> shapes_;
  std::shared_ptr<ProcessGroup> group_;
  std::string name_;
  zero::FlatLayout layout_;
  int64_t padded_ = 0;
  DType dtype_ = kF32;  // the parameters' own dtype (the checkpoints' and state dicts')
  DType gather_dtype_ = kF32;          // the compute gather's dtype
  std::vector<DType> compute_dtypes_;  // per parameter
  std::vector<Tensor> absent_;         // per parameter: what it holds between uses (absent())
  DType reduce_dtype_ = kF32;          // the gradient buffer's and reduce-scatter's dtype
  bool lowered_ = false;               // some parameter computes in another dtype than dtype_
  bool full_precision_ = false;        // the current gather is kFull
  Device device_;
  Variable shard_;      // f32 master (f64 for f64 parameters); .grad() its averaged gradient
  std::shared_ptr<offload::ShardHome> home_;  // offloaded: where values and gradient live
  Tensor full_;         // the gathered flat buffer, while gathering or gathered
  std::shared_ptr<Work> gather_work_;  // the all-gather in flight, if any

  std::vector<bool> ready_;
  size_t ready_count_ = 0;
  Tensor grad_flat_;  // full padded gradient buffer of this backward
  Tensor reduced_;    // this rank's part of the average, while in flight
  std::shared_ptr<Work> work_;
};

}  // namespace dist
}  // namespace tessera
