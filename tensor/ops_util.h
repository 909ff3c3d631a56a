// Small checks shared by the ops_*.cc files (internal to //tensor).
#pragma once

#include "tensor/backend.h"
#include "tensor/tensor.h"

namespace tessera {
namespace detail {

// NHWC storage that is not also contiguous NCHW (1x1 planes or one channel are both): the
// tensors ops give channels-last kernels (Backend::channels_last).
inline bool is_nhwc(const Tensor& t) { return t.is_channels_last() && !t.is_contiguous(); }

// The layout an op hands its kernel: channels-last when `nhwc` (the op's operands are, or it is
// asked to be) and the device's backend has that channels-last kernel for `dtype`.
inline MemoryFormat kernel_format(bool nhwc, ChannelsLastKernel kernel, DType dtype,
                                  Device device) {
  return nhwc && backend(device).channels_last(kernel, dtype) ? MemoryFormat::kChannelsLast
                                                              : MemoryFormat::kContiguous;
}

// A channels-blocked [N, C, H, W] tensor seen as the NHWC [N * C/16, 16, H, W]: each (image,
// block of 16 channels) an image of 16 channels, so a channels-last kernel that treats channels
// independently (pooling) runs on it as it is.
inline Tensor blocks_as_nhwc(const Tensor& t) {
  const Tensor b = t.channel_blocks();  // [N, C/16, H, W, 16], contiguous
  return b.view({b.size(0) * b.size(1), b.size(2), b.size(3), 16}).permute({0, 3, 1, 2});
}

// A channels-blocked tensor (nChw16c, which no strides express) as the NCHW copy that ops
// without kernels for it read; any other tensor as it is.
inline Tensor strided(const Tensor& t) {
  return t.defined() && t.is_channels_blocked() ? t.contiguous() : t;
}

inline void check_defined(const Tensor& t, const char* op, const char* what = "input") {
  TS_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  TS_CHECK(a.device() == b.device(), op, ": expected tensors on one device, got ", a.device(),
           " and ", b.device());
}

inline void check_floating(const Tensor& t, const char* op) {
  TS_CHECK(is_floating(t.dtype()), op, ": expected a floating-point tensor, got ", t.dtype());
}

// The dtype per-channel statistics are kept in: f64 for f64 inputs, else f32.
inline DType compute_dtype(DType dtype) { return dtype == kF64 ? kF64 : kF32; }

}  // namespace detail
}  // namespace tessera
