// What the C++ side of the CUDA backend hands to the kernels: plain structs with raw pointers,
// sizes and element strides, so the .cu files need nothing but this, tensor/kinds.h and the
// CUDA headers (nvcc never sees Eigen or the Tensor class).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/kinds.h"
#include "tensor/update_params.h"

namespace tessera {
namespace cuda {

// Elementwise kernels index tensors of up to this many dims (more: an error before launch).
constexpr int kMaxDims = 8;

// One operand of an elementwise kernel: a strided view of `numel` elements.
struct TensorArg {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements
  bool contiguous = true;
};

// NCHW pooling geometry.
struct PoolArgs {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool count_include_pad = true;
};

// One tensor of a multi-tensor optimizer update: the parameter, its gradient, and up to three
// state tensors (SGD: momentum buffer; Adam: exp_avg, exp_avg_sq, max_exp_avg_sq or null).
struct ListSlot {
  void* param = nullptr;
  const void* grad = nullptr;
  void* state[3] = {nullptr, nullptr, nullptr};
  int64_t numel = 0;
};

}  // namespace cuda
}  // namespace tessera
