// Autocast: mixed-precision forward passes without touching the model (PyTorch's torch.autocast).
//
// Inside an AutocastGuard, each differentiable op looks itself up in one policy table
// (autocast.cc) and casts its floating-point inputs before computing:
//
//   lower precision   conv2d, linear, matmul          -> f16 / bf16 (the guard's dtype)
//   f32               softmax, log_softmax, losses,   -> f32 (range and accuracy matter:
//                     exp, log, pow, sum, mean, var,        exponentials, long sums)
//                     layer_norm
//   f32 statistics    batch_norm, batch_norm_relu     -> the input keeps its dtype; mean,
//                                                        variance, the normalization and the
//                                                        f32 parameters' gradients in f32, the
//                                                        output in the input's dtype
//   promote           add, sub, mul, div, maximum,    -> the widest floating input dtype
//                     minimum, where, cat             (f16 with f32 gives f32)
//   (not listed)      relu, pooling, views, ...       -> run in whatever dtype arrives
//
// Batch norm is PyTorch's and cuDNN's mixed kind: its long sums are f32, but casting its input
// and output to f32 would double the bytes a ResNet keeps for backward (the convolution's
// output, batch norm's, ReLU's) instead of halving them.
//
// The casts are differentiable (to(Variable, DType)), so the gradient of an f32 parameter used
// by an f16 matmul comes back through the cast and reaches the parameter in f32. f64 inputs are
// never cast (gradchecks stay exact), nor are integer ones.
//
// The cast cache: a parameter (a leaf that requires grad) used by several ops inside one guard
// is cast once; every use shares the same cast Variable, so backward sums the uses' gradients
// in the low dtype and casts back once (one ToDTypeBackward node per parameter). The cache
// lives until the outermost guard of the thread exits, so the recipe is: forward (and loss)
// inside the guard, backward and the optimizer step after it (a step inside the guard would
// leave the cached casts holding the old parameter values, as in PyTorch).
//
//   {
//     AutocastGuard autocast(kBF16);              // every device type; or (kBF16, DeviceType::kCPU)
//     loss = cross_entropy(model->forward(x), y);
//   }
//   loss.backward();
//
// Guards nest: an inner guard replaces the setting for its device types until it exits, and
// AutocastGuard(kF16, DeviceType::kCPU, /*enabled=*/false) opens a region that runs in the
// inputs' own dtypes. The state is per thread, like grad mode.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "autograd/variable.h"
#include "tensor/device.h"
#include "tensor/dtype.h"

namespace tessera {

// What autocast does to an op's floating-point inputs.
enum class CastPolicy {
  kLowerPrecision,  // cast to the guard's dtype (f16 or bf16)
  kF32,             // cast to f32
  kF32Statistics,   // no cast: the op keeps the input's dtype and computes in f32 inside
  kPromote,         // cast to the widest of the inputs' dtypes
  kNone,            // leave as they are (ops not in the table)
};

// The table's entry for an op name ("linear", "softmax", ...).
CastPolicy autocast_policy(const char* op);

// The thread's autocast settings, captured to be re-entered later: activation checkpointing
// recomputes a forward during backward, after the guard has exited, and must run it with the
// settings of the first run (as PyTorch's checkpoint does).
struct AutocastSettings {
  std::array<std::pair<bool, DType>, kNumDeviceTypes> per_device;  // (enabled, dtype)
};
AutocastSettings autocast_settings();

class AutocastGuard {
 public:
  // Enables autocast to `dtype` (kF16 or kBF16) for ops on every device type, or on one.
  explicit AutocastGuard(DType dtype, bool enabled = true);
  AutocastGuard(DType dtype, DeviceType device_type, bool enabled = true);
  // Re-enters captured settings.
  explicit AutocastGuard(const AutocastSettings& settings);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  // Saves every device type's setting and opens a nesting level.
  void begin();
  AutocastSettings previous_;
};

// Whether autocast is on for tensors of `device_type` in this thread, and to which dtype.
bool is_autocast_enabled(DeviceType device_type);
DType autocast_dtype(DeviceType device_type);
// Parameters cast so far within the outermost guard (for tests and teaching).
size_t autocast_cache_size();

namespace detail {
// True when autocast is on for some device type (one thread-local read: the ops' fast path).
bool autocast_any_enabled();
// Casts inputs[0..n) in place as op's policy says (undefined Variables are skipped).
void autocast_inputs(const char* op, Variable* inputs, size_t n);
}  // namespace detail

// The op's inputs as autocast wants them: what a differentiable op calls first,
//   const auto in = autocast_args("linear", x_in, weight_in, bias_in);
//   const Variable &x = in[0], &weight = in[1], &bias = in[2];
// (references rather than structured bindings, which C++17 lambdas cannot capture).
// Returns the inputs unchanged (cheap handle copies) when autocast is off.
template <typename... Vs>
std::array<Variable, sizeof...(Vs)> autocast_args(const char* op, const Vs&... inputs) {
  std::array<Variable, sizeof...(Vs)> args{inputs...};
  if (detail::autocast_any_enabled()) detail::autocast_inputs(op, args.data(), args.size());
  return args;
}

}  // namespace tessera
