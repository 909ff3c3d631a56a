// ShardHome: where a ZeRO-3 unit's flat shard (its f32 master values) and the shard's averaged
// gradient live between their uses when parameters and gradients are offloaded (ZeRO-Infinity's
// offload_param, and its gradients kept beside the optimizer state):
//
//   values    read whole for the unit's all-gather (forward, and backward's re-gather) and for
//             the step; written back by the step (and by a loaded state dict)
//   gradient  written by the unit's reduce-scatter (added to the one there when backward runs
//             again before the step: gradient accumulation); read by the step and by gradient
//             clipping; forgotten by zero_grad
//
//   forward    read values ─ all-gather ─ unit forward            (the read shard dropped)
//   backward   read values ─ all-gather ─ unit backward ─ reduce-scatter ─ write gradient
//   step       per unit: read values and gradient ─ step (state streamed by the optimizer
//              swapper) ─ write values
//
// The transfers run behind the compute (ZeRO-Infinity's prefetch and write-behind): prefetch()
// posts the reads of a shard the caller will need next (FullyShardedDataParallel: the unit after
// the next one to gather; the optimizer: the next shard to step), and gradient and value writes
// return once their bytes are copied to a staging buffer, the disk write finishing on the I/O
// threads. A read of either kind first waits for that kind's write in flight; a write first drops
// a prefetched read of the old values.
//
// Neither is resident between uses: the unit's shard Variable holds an empty tensor and no
// gradient, so a rank's resident bytes are the units in flight, not its 1/N of the model. Either
// kind may stay on the device (a null store), the Variable then keeping it as without offload.
// Every unit's home shares one store per tier (one file per rank on the disk tier), reserved
// unit by unit before the store is committed. The bytes stored are the bytes kept: reading them
// back is exact, so an offloaded run equals the in-memory one bit for bit.
#pragma once

#include <memory>

#include "autograd/variable.h"
#include "dist/zero/offload/store.h"
#include "dist/zero/offload/swapped_vector.h"

namespace tessera {
namespace dist {
namespace offload {

// The writes in flight of a wrapper's homes, behind the compute: at most `depth` at once (the
// oldest waited for when another is added), so the staging buffers they hold stay a few shards,
// not every unit's.
class WriteBehind {
 public:
  explicit WriteBehind(size_t depth = 2) : depth_(depth) {}
  ~WriteBehind() { drain(); }
  void add(SwappedVector::Transfer write);
  void drain();

 private:
  size_t depth_;
  std::vector<SwappedVector::Transfer> writes_;  // oldest first
};

class ShardHome {
 public:
  // A shard of `numel` elements of `dtype` whose values go to `values` and gradient to
  // `gradients` (either null: kept in the Variable). Reserves segments in pieces of
  // `piece_numel` elements; the stores' owner commits them before the first write.
  // `writes`: the window its writes join (shared by a wrapper's homes; null: a window of its own).
  ShardHome(int64_t numel, DType dtype, Device device, int64_t piece_numel,
            std::shared_ptr<OffloadStore> values, std::shared_ptr<OffloadStore> gradients,
            std::shared_ptr<WriteBehind> writes = nullptr);
  ShardHome(const ShardHome&) = delete;
  ShardHome& operator=(const ShardHome&) = delete;

  bool values_offloaded() const { return values_ != nullptr; }
  bool gradients_offloaded() const { return gradients_ != nullptr; }
  int64_t numel() const { return numel_; }

  Tensor read_values();
  void write_values(const Tensor& values);
  // A gradient has been written since the last clear_gradient().
  bool has_gradient() const { return has_gradient_; }
  Tensor read_gradient();  // undefined when there is none
  // Also keeps the gradient's sum of squares (optim::squared_sum, taken while it is in memory),
  // so clipping and the finite check need no read of it.
  void write_gradient(const Tensor& gradient);
  // The sum of squares of the gradient held (0 when none), as optim::grad_squared_sum adds it.
  double gradient_squared_sum() const { return has_gradient_ ? squared_sum_ : 0.0; }
  void clear_gradient();

  // Puts the offloaded kinds into `shard` (its data, and its gradient if there is one), for the
  // step or a checkpoint; put_back() writes the values back when `values_changed` and leaves
  // the Variable empty again (the gradient stays in the store until clear_gradient()).
  void bring_in(const Variable& shard);
  void put_back(const Variable& shard, bool values_changed);
  // Posts the reads of the values (and of the gradient, when `gradient` and there is one) that a
  // later read_values()/bring_in() takes; a no-op for what is in flight already or not offloaded.
  void prefetch(bool gradient);
  // Waits for every transfer in flight, the shared window's writes too, releasing their staging
  // buffers (before the store goes, and before measuring what is resident at rest).
  void finish_transfers();
  ~ShardHome();
  // The Variable at rest: its values and gradient moved into the store (at construction).
  void take_from(const Variable& shard);

 private:
  int64_t numel_;
  DType dtype_;
  Device device_;
  std::unique_ptr<SwappedVector> values_;
  std::unique_ptr<SwappedVector> gradients_;
  bool has_gradient_ = false;
  double squared_sum_ = 0;
  std::shared_ptr<WriteBehind> writes_;
  SwappedVector::Transfer values_read_, gradient_read_;
  // This home's writes in flight (their buffers held by writes_): a read waits for them first.
  std::vector<IoRequest> values_writing_, gradient_writing_;
};

}  // namespace offload
}  // namespace dist
}  // namespace tessera
