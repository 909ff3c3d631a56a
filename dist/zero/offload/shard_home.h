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

class ShardHome {
 public:
  // A shard of `numel` elements of `dtype` whose values go to `values` and gradient to
  // `gradients` (either null: kept in the Variable). Reserves segments in pieces of
  // `piece_numel` elements; the stores' owner commits them before the first write.
  ShardHome(int64_t numel, DType dtype, Device device, int64_t piece_numel,
            std::shared_ptr<OffloadStore> values, std::shared_ptr<OffloadStore> gradients);

  bool values_offloaded() const { return values_ != nullptr; }
  bool gradients_offloaded() const { return gradients_ != nullptr; }
  int64_t numel() const { return numel_; }

  Tensor read_values() const;
  void write_values(const Tensor& values) const;
  // A gradient has been written since the last clear_gradient().
  bool has_gradient() const { return has_gradient_; }
  Tensor read_gradient() const;  // undefined when there is none
  // Also keeps the gradient's sum of squares (optim::squared_sum, taken while it is in memory),
  // so clipping and the finite check need no read of it.
  void write_gradient(const Tensor& gradient);
  // The sum of squares of the gradient held (0 when none), as optim::grad_squared_sum adds it.
  double gradient_squared_sum() const { return has_gradient_ ? squared_sum_ : 0.0; }
  void clear_gradient() { has_gradient_ = false; }

  // Puts the offloaded kinds into `shard` (its data, and its gradient if there is one), for the
  // step or a checkpoint; put_back() writes the values back when `values_changed` and leaves
  // the Variable empty again (the gradient stays in the store until clear_gradient()).
  void bring_in(const Variable& shard) const;
  void put_back(const Variable& shard, bool values_changed) const;
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
};

}  // namespace offload
}  // namespace dist
}  // namespace tessera
