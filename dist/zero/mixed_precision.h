// MixedPrecision for ZeRO-3 units (PyTorch FSDP's MixedPrecision(param_dtype, reduce_dtype)).
//
// A unit's shard stays the f32 master the optimizer steps; what changes is the dtype the unit
// is gathered in and the dtype its gradients are averaged in:
//
//   shard (f32) ── cast ──> param_dtype ── all-gather ──> full unit in param_dtype ── forward,
//                                                                                    backward
//   grads (param_dtype) ── reduce_dtype ── reduce-scatter ──> shard grad (f32) ── optimizer
//
// Why it matters under autocast: autocast casts an f32 parameter once per forward and caches
// the cast until its guard closes, and Linear/Conv2d save that cast for backward, so a ZeRO-3
// forward under autocast would keep a low-precision copy of every unit alive through forward
// and backward (about 2 psi bytes), and the backward all-gather would fetch f32 values no op
// reads. Gathered in param_dtype, the parameters already have the dtype autocast wants: nothing
// is cast, nothing cached, and what backward saves is the parameter itself, freed with the unit.
// The all-gathers carry half the bytes too.
//
// Parameters of modules that keep_f32_under_half() (BatchNorm) keep their own dtype, as
// Module::to(kBF16) leaves them (FSDP ignores _BatchNorm modules for the same reason). A unit
// whose parameters are all lowered is gathered in param_dtype; a unit that mixes the two kinds
// (a whole ResNet block) is gathered in its own dtype and its lowered parameters cast right
// after the gather, so it still holds nothing outside the unit. Buffers keep their dtype.
#pragma once

#include <optional>

#include "tensor/check.h"
#include "tensor/dtype.h"

namespace tessera {
namespace dist {

class MixedPrecision {
 public:
  // The dtype units are gathered and compute in (f16 or bf16; unset: the parameters' own).
  MixedPrecision& param_dtype(DType d) {
    TS_CHECK(d == kF16 || d == kBF16 || d == kF32, "MixedPrecision: param_dtype must be f16, bf16 "
             "or f32, got ", d);
    param_dtype_ = d;
    return *this;
  }
  // The dtype gradients are averaged in (unset: param_dtype, as FSDP's default).
  MixedPrecision& reduce_dtype(DType d) {
    TS_CHECK(d == kF16 || d == kBF16 || d == kF32, "MixedPrecision: reduce_dtype must be f16, "
             "bf16 or f32, got ", d);
    reduce_dtype_ = d;
    return *this;
  }
  const std::optional<DType>& param_dtype() const { return param_dtype_; }
  const std::optional<DType>& reduce_dtype() const { return reduce_dtype_; }
  bool enabled() const { return param_dtype_.has_value(); }

 private:
  std::optional<DType> param_dtype_;
  std::optional<DType> reduce_dtype_;
};

}  // namespace dist
}  // namespace tessera
