// The plain enums every backend sees: element types and the elementwise/reduction op codes.
//
// This header has no dependencies, so CUDA sources compiled by nvcc (tensor/cuda/*.cu) can
// include it without Eigen or the rest of the Tensor headers.
#pragma once

#include <cstdint>

namespace tessera {

enum class DType : uint8_t { kF32, kF64, kF16, kBF16, kI64, kI32, kU8, kBool };

enum class UnaryOp {
  kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kRelu, kSign, kSquare, kReciprocal,
  kClamp,  // alpha = low, beta = high
};

enum class BinaryOp {
  kAdd, kSub, kMul, kDiv, kMaximum, kMinimum, kPow,
  kEq, kNe, kLt, kLe, kGt, kGe,  // output bool
  kReluBackward,     // a = grad, b = input:  grad * (input > 0)
  kSigmoidBackward,  // a = grad, b = output: grad * out * (1 - out)
  kTanhBackward,     // a = grad, b = output: grad * (1 - out^2)
};

enum class ReduceOp { kSum, kMean, kMax, kMin, kArgmax, kArgmin, kVar };

// GELU's two forms, PyTorch's approximate='none' and 'tanh' (tensor/ops.h has the formulas).
enum class GeluApproximate { kNone, kTanh };

}  // namespace tessera
