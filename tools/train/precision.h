// Mixed precision for the train tool: --amp and --loss-scale chosen over the library's pieces.
//
//   --amp=fp16   forward and loss under AutocastGuard(kF16); GradScaler multiplies the loss
//                before backward and steps only when no rank saw an inf/NaN gradient
//   --amp=bf16   AutocastGuard(kBF16); bf16 has f32's exponent range, so no loss scaling
//   --amp=off    f32 throughout (the scaler disabled: scale() and step() pass through)
//
// Distributed, the scaler's found_inf flag is MAX-reduced over every rank that must skip
// together (dist::found_inf_all_reduce): the data-parallel ranks, and for a pipeline the whole
// world, since each stage sees only its own gradients. --loss-scale=N keeps the scale at N
// (still skipping steps that overflow). --param-dtype=f16|bf16 puts the parameters themselves
// in half precision (model.cc: place_model; BatchNorm stays f32), the optimizer keeping f32
// masters; f16 parameters are loss-scaled too.
#pragma once

#include <memory>
#include <optional>

#include "autograd/autocast.h"
#include "dist/process_group.h"
#include "optim/grad_scaler.h"
#include "tensor/device.h"
#include "tensor/safetensors.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

class MixedPrecision {
 public:
  // found_inf_group: null for one process.
  MixedPrecision(const Config& config, Device device,
                 std::shared_ptr<dist::ProcessGroup> found_inf_group);

  // Opens autocast in `guard` (nothing with --amp=off). Forward and loss run inside it;
  // backward and the optimizer step after it (autocast.h).
  void autocast(std::optional<AutocastGuard>& guard) const;
  // --amp: whether autocast is on, and its dtype (ZeRO-3 gathers its units in it).
  bool autocast_enabled() const { return enabled_; }
  DType autocast_dtype() const { return dtype_; }
  optim::GradScaler& scaler() { return scaler_; }
  const optim::GradScaler& scaler() const { return scaler_; }
  // Divides the gradients by the loss scale now (a no-op unless the loss is scaled), so that
  // --clip-grad-norm clips the true gradients; step() then does not unscale again.
  void unscale(optim::Optimizer& optimizer);
  // Unscales and steps the optimizer unless a gradient was inf/NaN on some rank, then updates
  // the scale (dynamic) or keeps it (--loss-scale=N). Returns whether it stepped.
  bool step(optim::Optimizer& optimizer);
  // The scaler's state as checkpoint metadata, "scaler.NAME" (f64 scalars printed exactly:
  // dist/checkpoint.h stores only the model's and the optimizer's tensors), and its inverse
  // (nothing to restore when either run did not scale: off, bf16).
  Metadata checkpoint_metadata() const;
  void load_checkpoint_metadata(const Metadata& metadata);
  // "bf16 autocast, no loss scaling" and the like, for the run's first line.
  std::string describe() const;

 private:
  bool enabled_;
  DType dtype_;
  double static_scale_;  // 0: dynamic
  std::string param_dtype_;
  optim::GradScaler scaler_;
};

}  // namespace train
}  // namespace tessera
