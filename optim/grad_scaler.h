// GradScaler: dynamic loss scaling for f16 training (Micikevicius et al., "Mixed Precision
// Training", 2018; PyTorch's torch.amp.GradScaler, with DeepSpeed's hysteresis and floor).
//
// f16 holds magnitudes from 6e-8 to 65504, and small gradients of activations flush to zero in
// backward. Multiplying the loss by a scale S shifts every gradient up by S, into range; the
// gradients are divided by S again before the optimizer sees them. S is chosen dynamically:
//
//   step:     1        2       ...  2000     2001        2002  ...
//   grads:    ok       ok           ok       inf/NaN     ok
//   action:   step     step         step,    SKIP,       step
//                                   S *= 2   S *= 0.5
//
// The largest S that does not overflow is the goal: S grows by growth_factor after
// growth_interval clean steps in a row, and backs off by backoff_factor on a step whose
// gradients hold an inf or NaN, which is then skipped (parameters and optimizer state, Adam's
// step count included, untouched). The recipe, as PyTorch's:
//
//   {
//     AutocastGuard autocast(kF16);
//     loss = cross_entropy(model->forward(x), y);
//   }
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                    // optional: clip true gradients
//   optim::clip_grad_norm(model->parameters(), 1.0);
//   scaler.step(optimizer);                        // unscales if not done; skips on inf/NaN
//   scaler.update();
//
// Unscaling and the inf/NaN check are one pass over the gradients (tensor/unscale.h), on the
// gradients' device. Distributed training needs every rank to make the same decision, or the
// ranks' parameters diverge: found_inf (an f32 flag) goes through the FoundInfReduction the
// caller provides, a MAX all-reduce over the data-parallel group (dist/amp.h), before anyone
// decides. optim knows nothing of process groups; dist supplies the reduction.
//
// f16/bf16 gradients (half-precision parameters) are unscaled in place in their own dtype;
// the optimizer then updates its f32 master copy from them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "autograd/variable.h"
#include "optim/optimizer.h"
#include "tensor/device.h"
#include "tensor/state_dict.h"

namespace tessera {
namespace optim {

// Makes found_inf (one f32 element, 1 = some rank saw inf/NaN) the same on every rank, in place.
using FoundInfReduction = std::function<void(const Tensor& found_inf)>;

class GradScalerOptions {
 public:
  GradScalerOptions() = default;
  // PyTorch's knobs and defaults.
  GradScalerOptions& init_scale(double s) { init_scale_ = s; return *this; }
  GradScalerOptions& growth_factor(double f) { growth_factor_ = f; return *this; }
  GradScalerOptions& backoff_factor(double f) { backoff_factor_ = f; return *this; }
  GradScalerOptions& growth_interval(int64_t n) { growth_interval_ = n; return *this; }
  GradScalerOptions& enabled(bool on) { enabled_ = on; return *this; }
  // DeepSpeed's: back off only after `hysteresis` overflows in a row (1: every overflow, as
  // PyTorch); never below min_scale; an error after max_consecutive_skips skipped steps in a
  // row (0: never), rather than silently training nothing.
  GradScalerOptions& hysteresis(int64_t h) { hysteresis_ = h; return *this; }
  GradScalerOptions& min_scale(double s) { min_scale_ = s; return *this; }
  GradScalerOptions& max_consecutive_skips(int64_t n) { max_consecutive_skips_ = n; return *this; }
  // Where found_inf lives (the gradients' device, so the reduction can run on it).
  GradScalerOptions& device(Device d) { device_ = d; return *this; }

  double init_scale() const { return init_scale_; }
  double growth_factor() const { return growth_factor_; }
  double backoff_factor() const { return backoff_factor_; }
  int64_t growth_interval() const { return growth_interval_; }
  bool enabled() const { return enabled_; }
  int64_t hysteresis() const { return hysteresis_; }
  double min_scale() const { return min_scale_; }
  int64_t max_consecutive_skips() const { return max_consecutive_skips_; }
  Device device() const { return device_; }
  // Throws naming the values when they make no sense.
  void validate() const;

 private:
  double init_scale_ = 65536.0;  // 2^16
  double growth_factor_ = 2.0;
  double backoff_factor_ = 0.5;
  int64_t growth_interval_ = 2000;
  bool enabled_ = true;
  int64_t hysteresis_ = 1;
  double min_scale_ = 0.0;
  int64_t max_consecutive_skips_ = 0;
  Device device_;
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {},
                      FoundInfReduction reduce_found_inf = nullptr);

  // loss * scale, in f32 (an f16 loss is promoted, as PyTorch's f32 scale tensor does).
  // Disabled: the loss itself.
  Variable scale(const Variable& loss) const;

  // Divides the optimizer's gradients (optimizer.gradient_variables(): a ZeRO-2 optimizer's
  // shard) by the scale in place and records whether any is inf or NaN (reduced across ranks). At most once per optimizer between update()s; an error after
  // step(). Disabled: does nothing.
  void unscale_(Optimizer& optimizer);
  // Unscales (unless unscale_ was called), then steps the optimizer unless some gradient was
  // inf or NaN. Returns whether it stepped. Disabled: optimizer.step(), true.
  bool step(Optimizer& optimizer);

  // Adjusts the scale from this iteration's checks (back off on inf/NaN, grow after
  // growth_interval clean steps) and readies every optimizer for the next iteration.
  void update();
  // Sets the scale directly (and readies every optimizer), as PyTorch's update(new_scale); a
  // skipped step still counts (skipped_steps, max_consecutive_skips), unlike PyTorch's. Needs
  // the iteration's inf checks, as update() does.
  void update(double new_scale);

  // The current scale (1 when disabled).
  double get_scale() const;
  bool is_enabled() const { return options_.enabled(); }
  const GradScalerOptions& options() const { return options_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  // Steps skipped so far, and how many of the latest update()s in a row saw inf/NaN.
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t consecutive_overflows() const { return consecutive_overflows_; }

  // "scale", "growth_factor", "backoff_factor", "growth_interval", "growth_tracker",
  // "hysteresis", "min_scale", "consecutive_overflows", "skipped_steps" (f64 scalars); empty
  // when disabled. Loading restores them, so a resumed run scales exactly as an unbroken one.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  bool record_overflows(const char* who);
  void check_consecutive_skips() const;

  struct PerOptimizer {
    Stage stage = Stage::kReady;
    Tensor found_inf;  // f32 [1] on options_.device(), after unscale_
  };

  GradScalerOptions options_;
  FoundInfReduction reduce_found_inf_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t consecutive_overflows_ = 0;
  int64_t skipped_steps_ = 0;
  std::map<const void*, PerOptimizer> per_optimizer_;
};

}  // namespace optim
}  // namespace tessera
