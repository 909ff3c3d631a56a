// Autocast's policy table, its per-thread state and the cast cache (autocast.h explains them).
#include "autograd/autocast.h"

#include <cstring>
#include <unordered_map>
#include <utility>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "tensor/check.h"

namespace tessera {

namespace {

// The policy table: every differentiable op that autocast touches, and what it does.
// PyTorch's lists (torch/amp/autocast_mode.py, aten/src/ATen/autocast_mode.cpp) are the model:
// GEMM-like ops gain most from half precision and tolerate it (f32 accumulation); ops with
// exponentials, logarithms or long sums lose too much in it.
struct PolicyEntry {
  const char* op;
  CastPolicy policy;
};
constexpr PolicyEntry kPolicyTable[] = {
    // lower precision: the GEMMs
    {"conv2d", CastPolicy::kLowerPrecision},
    {"linear", CastPolicy::kLowerPrecision},
    {"matmul", CastPolicy::kLowerPrecision},
    {"causal_attention", CastPolicy::kLowerPrecision},  // as PyTorch's scaled_dot_product_attention
    {"causal_self_attention", CastPolicy::kLowerPrecision},
    // f32: exponentials, logarithms, powers, reductions, normalization, losses
    {"exp", CastPolicy::kF32},
    {"log", CastPolicy::kF32},
    {"pow", CastPolicy::kF32},
    {"sum", CastPolicy::kF32},
    {"mean", CastPolicy::kF32},
    {"var", CastPolicy::kF32},
    {"softmax", CastPolicy::kF32},
    {"log_softmax", CastPolicy::kF32},
    {"cross_entropy", CastPolicy::kF32},
    {"nll_loss", CastPolicy::kF32},
    {"mse_loss", CastPolicy::kF32},
    {"layer_norm", CastPolicy::kF32},
    // f32 statistics: normalization over long sums, in the input's dtype (autocast.h)
    {"batch_norm", CastPolicy::kF32Statistics},
    {"batch_norm_relu", CastPolicy::kF32Statistics},
    // promote: ops combining several tensors run in the widest input dtype
    {"add", CastPolicy::kPromote},
    {"sub", CastPolicy::kPromote},
    {"mul", CastPolicy::kPromote},
    {"div", CastPolicy::kPromote},
    {"maximum", CastPolicy::kPromote},
    {"minimum", CastPolicy::kPromote},
    {"where", CastPolicy::kPromote},
    {"cat", CastPolicy::kPromote},
};

struct Setting {
  bool enabled = false;
  DType dtype = kBF16;
};

// One cast parameter: the source is kept alive, so its address cannot be reused by another
// Variable while the entry exists.
struct CacheEntry {
  Variable source;
  Variable cast;
};

struct AutocastState {
  std::array<Setting, kNumDeviceTypes> settings;
  int enabled_count = 0;  // device types with autocast on: the ops' fast-path test
  int nesting = 0;        // open guards; the cache is cleared when the last one exits
  // (source, target dtype) -> cast
  std::unordered_map<const VariableImpl*, std::array<CacheEntry, 2>> cache;
};

thread_local AutocastState g_state;

void set(DeviceType type, Setting s) {
  Setting& slot = g_state.settings[static_cast<int>(type)];
  g_state.enabled_count += static_cast<int>(s.enabled) - static_cast<int>(slot.enabled);
  slot = s;
}

void check_dtype(DType dtype) {
  TS_CHECK(is_half(dtype), "AutocastGuard: dtype must be f16 or bf16, got ", dtype);
}

// Autocast casts f32, f16 and bf16 tensors; f64 and integer tensors are left alone.
bool eligible(const Variable& v) {
  return v.defined() && (v.dtype() == kF32 || is_half(v.dtype()));
}

// A parameter is cast once per outermost guard; other Variables (activations) every time.
Variable cached_cast(const Variable& v, DType to) {
  if (v.dtype() == to) return v;
  const bool cacheable = v.is_leaf() && v.requires_grad() && GradMode::is_enabled() &&
                         v.dtype() == kF32 && is_half(to);
  if (!cacheable) return tessera::to(v, to);
  CacheEntry& entry = g_state.cache[v.impl()][to == kF16 ? 0 : 1];
  if (!entry.cast.defined()) entry = {v, tessera::to(v, to)};
  return entry.cast;
}

}  // namespace

CastPolicy autocast_policy(const char* op) {
  for (const PolicyEntry& e : kPolicyTable) {
    if (std::strcmp(e.op, op) == 0) return e.policy;
  }
  return CastPolicy::kNone;
}

void AutocastGuard::begin() {
  previous_ = autocast_settings();
  ++g_state.nesting;
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled) {
  check_dtype(dtype);
  begin();
  for (int t = 0; t < kNumDeviceTypes; ++t) set(static_cast<DeviceType>(t), {enabled, dtype});
}

AutocastGuard::AutocastGuard(DType dtype, DeviceType device_type, bool enabled) {
  check_dtype(dtype);
  begin();
  set(device_type, {enabled, dtype});
}

AutocastGuard::AutocastGuard(const AutocastSettings& settings) {
  begin();
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    const auto [enabled, dtype] = settings.per_device[t];
    set(static_cast<DeviceType>(t), {enabled, dtype});
  }
}

AutocastGuard::~AutocastGuard() {
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    const auto [enabled, dtype] = previous_.per_device[t];
    set(static_cast<DeviceType>(t), {enabled, dtype});
  }
  // Exiting the outermost guard ends the forward: its parameter casts are dropped.
  if (--g_state.nesting == 0) g_state.cache.clear();
}

AutocastSettings autocast_settings() {
  AutocastSettings s;
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    s.per_device[t] = {g_state.settings[t].enabled, g_state.settings[t].dtype};
  }
  return s;
}

bool is_autocast_enabled(DeviceType device_type) {
  return g_state.settings[static_cast<int>(device_type)].enabled;
}

DType autocast_dtype(DeviceType device_type) {
  return g_state.settings[static_cast<int>(device_type)].dtype;
}

size_t autocast_cache_size() {
  size_t n = 0;
  for (const auto& [impl, entries] : g_state.cache) {
    for (const CacheEntry& e : entries) n += e.cast.defined() ? 1 : 0;
  }
  return n;
}

namespace detail {

bool autocast_any_enabled() { return g_state.enabled_count > 0; }

void autocast_inputs(const char* op, Variable* inputs, size_t n) {
  // The device of the first defined input decides (an op's inputs share one device).
  const Variable* first = nullptr;
  for (size_t i = 0; i < n && first == nullptr; ++i) {
    if (inputs[i].defined()) first = &inputs[i];
  }
  if (first == nullptr) return;
  const Setting s = g_state.settings[static_cast<int>(first->device().type())];
  if (!s.enabled) return;
  DType target = kF32;
  switch (autocast_policy(op)) {
    case CastPolicy::kNone:
    case CastPolicy::kF32Statistics:  // the op computes in f32 whatever the input's dtype
      return;
    case CastPolicy::kLowerPrecision:
      target = s.dtype;
      break;
    case CastPolicy::kF32:
      target = kF32;
      break;
    case CastPolicy::kPromote: {
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        if (!eligible(inputs[i])) continue;
        target = any ? promote_types(target, inputs[i].dtype()) : inputs[i].dtype();
        any = true;
      }
      if (!any) return;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (eligible(inputs[i])) inputs[i] = cached_cast(inputs[i], target);
  }
}

}  // namespace detail
}  // namespace tessera
