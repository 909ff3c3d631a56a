#include "optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/ops.h"
#include "tensor/unscale.h"

namespace tessera {
namespace optim {

void GradScalerOptions::validate() const {
  TS_CHECK(init_scale_ > 0 && std::isfinite(init_scale_),
           "GradScaler: init_scale must be positive and finite, got ", init_scale_);
  TS_CHECK(growth_factor_ > 1, "GradScaler: growth_factor must be > 1, got ", growth_factor_);
  TS_CHECK(backoff_factor_ > 0 && backoff_factor_ < 1,
           "GradScaler: backoff_factor must be in (0, 1), got ", backoff_factor_);
  TS_CHECK(growth_interval_ >= 1, "GradScaler: growth_interval must be >= 1, got ",
           growth_interval_);
  TS_CHECK(hysteresis_ >= 1, "GradScaler: hysteresis must be >= 1, got ", hysteresis_);
  TS_CHECK(min_scale_ >= 0 && min_scale_ <= init_scale_, "GradScaler: min_scale must be in [0, ",
           "init_scale = ", init_scale_, "], got ", min_scale_);
  TS_CHECK(max_consecutive_skips_ >= 0, "GradScaler: max_consecutive_skips must be >= 0, got ",
           max_consecutive_skips_);
}

GradScaler::GradScaler(const GradScalerOptions& options, FoundInfReduction reduce_found_inf)
    : options_(options),
      reduce_found_inf_(std::move(reduce_found_inf)),
      scale_(options.init_scale()) {
  options_.validate();
}

Variable GradScaler::scale(const Variable& loss) const {
  TS_CHECK(loss.defined(), "GradScaler::scale: the loss is undefined");
  if (!is_enabled()) return loss;
  const Tensor s = scalar_tensor(scale_, TensorOptions(kF32).device(loss.device()));
  return mul(loss, Variable(s));
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!is_enabled()) return;
  PerOptimizer& state = per_optimizer_[&optimizer];
  TS_CHECK(state.stage != Stage::kUnscaled, "GradScaler::unscale_: already called for this "
           "optimizer since the last update() (at most once per step, before step())");
  TS_CHECK(state.stage != Stage::kStepped, "GradScaler::unscale_: called after step(); call "
           "update() first");
  NoGradGuard no_grad;
  const Device home = options_.device();
  Tensor found_inf = zeros({1}, TensorOptions(kF32).device(home));
  // One pass per device over that device's gradients; flags from elsewhere are folded in.
  std::map<std::pair<int, int>, std::vector<Tensor>> by_device;
  for (const Variable& p : optimizer.gradient_variables()) {
    if (!p.grad().defined()) continue;
    const Device d = p.grad().device();
    by_device[{static_cast<int>(d.type()), d.index()}].push_back(p.grad());
  }
  // PyTorch's inverse: the reciprocal in f64, rounded to f32 (exact for powers of two).
  const double inv_scale = static_cast<float>(1.0 / scale_);
  for (const auto& [key, grads] : by_device) {
    const Device d(static_cast<DeviceType>(key.first), key.second);
    if (d == home) {
      non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    } else {
      const Tensor local = zeros({1}, TensorOptions(kF32).device(d));
      non_finite_check_and_unscale_(grads, local, inv_scale);
      found_inf.copy_(maximum(found_inf, local.to(home)));
    }
  }
  // Collective: every rank calls it here, with or without gradients of its own.
  if (reduce_found_inf_) reduce_found_inf_(found_inf);
  state.found_inf = found_inf;
  state.stage = Stage::kUnscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!is_enabled()) {
    optimizer.step();
    return true;
  }
  TS_CHECK(per_optimizer_[&optimizer].stage != Stage::kStepped, "GradScaler::step: already "
           "called for this optimizer since the last update()");
  if (per_optimizer_[&optimizer].stage == Stage::kReady) unscale_(optimizer);
  PerOptimizer& state = per_optimizer_[&optimizer];
  const bool overflow = state.found_inf.item() != 0;
  if (!overflow) optimizer.step();
  state.stage = Stage::kStepped;
  return !overflow;
}

// This iteration's verdict, from the inf checks recorded since the last update(): counts a
// skipped step, or resets the count of overflows in a row. Returns whether it overflowed.
bool GradScaler::record_overflows(const char* who) {
  bool checked = false, overflow = false;
  for (const auto& [key, state] : per_optimizer_) {
    if (!state.found_inf.defined()) continue;
    checked = true;
    overflow = overflow || state.found_inf.item() != 0;
  }
  per_optimizer_.clear();
  TS_CHECK(checked, who, ": no inf checks were recorded since the last update() (call step() or "
           "unscale_() first)");
  if (!overflow) {
    consecutive_overflows_ = 0;
    return false;
  }
  ++skipped_steps_;
  ++consecutive_overflows_;
  return true;
}

// After max_consecutive_skips overflows in a row the run trains nothing: end it.
void GradScaler::check_consecutive_skips() const {
  const int64_t limit = options_.max_consecutive_skips();
  TS_CHECK(limit == 0 || consecutive_overflows_ < limit, "GradScaler: loss scale fell to ",
           scale_, " after ", consecutive_overflows_, " consecutive overflows (inf/NaN "
           "gradients on every step: check the data, the learning rate and the model)");
}

void GradScaler::update() {
  if (!is_enabled()) return;
  if (record_overflows("GradScaler::update")) {
    growth_tracker_ = 0;
    if (consecutive_overflows_ >= options_.hysteresis()) {
      scale_ = std::max(scale_ * options_.backoff_factor(), options_.min_scale());
    }
    check_consecutive_skips();
    return;
  }
  if (++growth_tracker_ == options_.growth_interval()) {
    const double grown = scale_ * options_.growth_factor();
    if (std::isfinite(grown) && grown <= std::numeric_limits<float>::max()) scale_ = grown;
    growth_tracker_ = 0;
  }
}

void GradScaler::update(double new_scale) {
  if (!is_enabled()) return;
  TS_CHECK(new_scale > 0 && std::isfinite(new_scale),
           "GradScaler::update: new_scale must be positive and finite, got ", new_scale);
  // A static scale (the train tool's --loss-scale=N) still counts skipped steps and gives up
  // after max_consecutive_skips in a row.
  record_overflows("GradScaler::update(new_scale)");
  scale_ = new_scale;
  check_consecutive_skips();
}

double GradScaler::get_scale() const { return is_enabled() ? scale_ : 1.0; }

StateDict GradScaler::state_dict() const {
  StateDict out;
  if (!is_enabled()) return out;
  const auto put = [&out](const char* name, double v) { out.set(name, scalar_tensor(v, kF64)); };
  put("scale", scale_);
  put("growth_factor", options_.growth_factor());
  put("backoff_factor", options_.backoff_factor());
  put("growth_interval", static_cast<double>(options_.growth_interval()));
  put("growth_tracker", static_cast<double>(growth_tracker_));
  put("hysteresis", static_cast<double>(options_.hysteresis()));
  put("min_scale", options_.min_scale());
  put("consecutive_overflows", static_cast<double>(consecutive_overflows_));
  put("skipped_steps", static_cast<double>(skipped_steps_));
  return out;
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!is_enabled()) return;
  TS_CHECK(!state.empty(), "GradScaler::load_state_dict: the state dict is empty (was it "
           "saved from a disabled GradScaler?)");
  const auto get = [&state](const char* name) {
    TS_CHECK(state.contains(name), "GradScaler::load_state_dict: missing '", name, "'");
    return state.at(name).item();
  };
  GradScalerOptions loaded = options_;
  loaded.growth_factor(get("growth_factor"))
      .backoff_factor(get("backoff_factor"))
      .growth_interval(static_cast<int64_t>(get("growth_interval")))
      .hysteresis(static_cast<int64_t>(get("hysteresis")))
      .min_scale(get("min_scale"));
  loaded.validate();
  options_ = loaded;
  scale_ = get("scale");
  growth_tracker_ = static_cast<int64_t>(get("growth_tracker"));
  consecutive_overflows_ = static_cast<int64_t>(get("consecutive_overflows"));
  skipped_steps_ = static_cast<int64_t>(get("skipped_steps"));
  per_optimizer_.clear();
}

}  // namespace optim
}  // namespace tessera
