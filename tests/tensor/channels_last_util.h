// What the channels-last tests share (channels_last_test.cc, channels_last_conv_test.cc).
#pragma once

#include <cstdint>

#include "tensor/ops.h"

namespace tessera {

constexpr MemoryFormat kCL = MemoryFormat::kChannelsLast;

// NHWC storage that is not also contiguous NCHW.
inline bool nhwc(const Tensor& t) { return t.is_channels_last() && !t.is_contiguous(); }

// Standard normal values drawn in f64 from `seed`, then converted to `dtype`.
inline Tensor seeded(const Shape& shape, uint64_t seed, DType dtype = kF64) {
  Generator g(seed);
  return randn(shape, kF64, &g).to(dtype);
}

}  // namespace tessera
