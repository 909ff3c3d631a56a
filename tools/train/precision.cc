#include "tools/train/precision.h"

#include <cstdio>
#include <cstdlib>

#include "dist/amp.h"

namespace tessera {
namespace train {

namespace {

optim::GradScalerOptions scaler_options(const Config& c, Device device) {
  optim::GradScalerOptions options;
  options.enabled(c.amp == "fp16" || c.param_dtype == "f16").device(device);
  options.growth_interval(c.loss_scale_window).hysteresis(c.loss_scale_hysteresis)
      .min_scale(c.min_loss_scale);
  if (c.loss_scale > 0) options.init_scale(c.loss_scale);
  return options;
}

}  // namespace

MixedPrecision::MixedPrecision(const Config& c, Device device,
                               std::shared_ptr<dist::ProcessGroup> found_inf_group)
    : enabled_(c.amp != "off"),
      dtype_(c.amp == "fp16" ? kF16 : kBF16),
      static_scale_(c.loss_scale),
      param_dtype_(c.param_dtype),
      scaler_(scaler_options(c, device),
              found_inf_group ? dist::found_inf_all_reduce(std::move(found_inf_group)) : nullptr) {}

void MixedPrecision::autocast(std::optional<AutocastGuard>& guard) const {
  if (enabled_) guard.emplace(dtype_);
}

void MixedPrecision::unscale(optim::Optimizer& optimizer) {
  if (scaler_.is_enabled()) scaler_.unscale_(optimizer);
}

bool MixedPrecision::step(optim::Optimizer& optimizer) {
  const bool stepped = scaler_.step(optimizer);
  if (static_scale_ > 0) {
    scaler_.update(static_scale_);
  } else {
    scaler_.update();
  }
  return stepped;
}

Metadata MixedPrecision::checkpoint_metadata() const {
  Metadata out;
  for (const auto& [name, value] : scaler_.state_dict()) {
    char text[40];
    std::snprintf(text, sizeof(text), "%.17g", value.item());
    out["scaler." + name] = text;
  }
  return out;
}

void MixedPrecision::load_checkpoint_metadata(const Metadata& metadata) {
  const std::string prefix = "scaler.";
  StateDict state;
  for (const auto& [key, text] : metadata) {
    if (key.rfind(prefix, 0) != 0) continue;
    state.set(key.substr(prefix.size()), scalar_tensor(std::strtod(text.c_str(), nullptr), kF64));
  }
  if (scaler_.is_enabled() && !state.empty()) scaler_.load_state_dict(state);
}

std::string MixedPrecision::describe() const {
  std::string text = !enabled_ ? "f32 arithmetic"
                     : dtype_ == kBF16 ? "bf16 autocast (bf16 has f32's range: loss scaling is off)"
                                       : "fp16 autocast";
  if (param_dtype_ != "f32") {
    text += ", " + param_dtype_ + " parameters (f32 masters in the optimizer, BatchNorm in f32)";
  }
  if (scaler_.is_enabled()) {
    char scale[80];
    std::snprintf(scale, sizeof(scale), ", %s loss scale %g",
                  static_scale_ > 0 ? "static" : "dynamic", scaler_.get_scale());
    text += scale;
  }
  return text;
}

}  // namespace train
}  // namespace tessera
